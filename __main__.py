"""gpucluster stack program. All logic lives in the `components` package; see README.md."""

from components.program import main

main()
