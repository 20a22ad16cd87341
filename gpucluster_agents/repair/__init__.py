# pyright: strict
"""What the maintenance pass does with unhealthy nodes: ``quarantine`` (reboot or replace the nodes the health
program drained, a share of a group at a time), ``brake`` (the group's circuit breaker when too many drain at
once), ``protect`` (protected mode after repeated boot failures, riding on the capacity holds) and ``api`` (their
two AWS calls, RebootInstances and SetInstanceHealth). Their settings are the config's ``repair`` section
(``gpucluster_agents.contract.repair``); they use the power agent's collaborators (``gpucluster_agents.power``).
"""
