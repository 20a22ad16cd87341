"""The pull-request preview that `.github/workflows/preview.yml` runs: plan the base and the head checkout of
every stack a change can affect, offline (:mod:`~gpucluster.tools.ci.preview`), and keep one sticky comment on
the pull request up to date (:mod:`~gpucluster.tools.ci.github`)."""
