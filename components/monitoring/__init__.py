"""Monitoring: the AMP workspace, its rules and Alertmanager, the alert topic, the log groups, the EKS scraper and
Grafana."""
