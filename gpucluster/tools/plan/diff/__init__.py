"""Two plans compared: steps, carried replacements, safety, disruption, cost, and their renderings (see :mod:`gpucluster.tools.plan`)."""
