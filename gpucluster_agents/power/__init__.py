# pyright: strict
"""The Slurm power agent's parts: what ``agent`` (resume, suspend, resume-fail, maintain, topology) is made of.

``inventory`` (the cluster's instances, one view per call) → ``sweep`` (repair at the start of every call),
``lifecycle`` (instances AWS took away, groups removed or shrunk), ``launcher`` (CreateFleet batches and
terminations), ``holds`` (capacity and failure holds), ``static_groups`` (Auto Scaling groups' instances),
``names`` / ``nodemap`` (node names published in S3), ``topology`` / ``topology_pass`` (topology.conf) → the
collaborators every part talks through: ``ec2``, ``slurm`` (scontrol), ``state`` (the lock, the journal and
the agent's records), ``error_codes``, ``apitime``. The repair pass (``gpucluster_agents.repair``) uses them too.
"""
