"""The plan as a person reads it: text, summary, estimate, tree, picture (see :mod:`gpucluster.tools.plan`)."""
