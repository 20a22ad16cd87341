"""gpucluster-logs: a node's logs to the cluster's CloudWatch Logs group, so they outlive the node (docs/monitoring.md
"Logs"). Stdlib and boto3 only; ``python3 -m gpucluster_agents.logship run --config /etc/gpucluster/logs.json``."""
