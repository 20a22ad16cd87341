"""Helpers more than one family of components uses, kept in one place rather than copied or owned by one family:

- ``inputs``        the Args checks every component runs (plain values vs Outputs, references by kind);
- ``config_types``  the config sections as typed dicts, the nested fields of every Args (GENERATED);
- ``buckets``       a private, encrypted S3 bucket (flow logs, data buckets, the Slurm agent's artifacts);
- ``roles``         EC2 roles with Session Manager access (node groups, head node, EKS, hybrid nodes);
- ``security``      security group rules (network, storage, EKS hybrid nodes, the hybrid link);
- ``agent_iam``     the Slurm node agent's IAM policy, on the head node's role and on a hybrid site's role.
"""
