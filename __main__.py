"""gpucluster stack program. All logic lives in the `gpucluster` package (gpucluster.program); see README.md."""

from gpucluster.program import main

main()
