"""Prometheus metrics of a GPU node and of the head node: GPUs (from NVML, under the DCGM exporter's names),
EFA, the Lustre client, Slurm and the agent. ``python -m gpucluster_agents.metrics serve`` (docs/monitoring.md)."""
