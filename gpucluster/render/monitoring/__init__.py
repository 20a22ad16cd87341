"""Monitoring: what Prometheus (Amazon Managed Service for Prometheus) evaluates and shows.

- :mod:`.rules`: the alert rule groups (Prometheus rules YAML), one document per cluster;
- :mod:`.alertmanager`: the Alertmanager definition in AMP's format, routing to an SNS topic;
- :mod:`.cloudwatch_alarms`: the alerts whose figures only CloudWatch has (FSx for Lustre);
- :mod:`.dashboards`: Grafana dashboards (JSON), shipped as files or provisioned into Managed Grafana.

Metric names: the DCGM exporter's (``DCGM_FI_*``, which gpucluster's own NVML exporter on Slurm nodes also
emits), the node exporter's (``node_*``), Kueue's (``kueue_*``) and gpucluster's node package
(``gpucluster_*``, :mod:`.series`). docs/monitoring.md ``## Alerts`` lists every alert and where it lives.
"""
