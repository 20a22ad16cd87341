"""The policy rules gpucluster promises of every stack, as pure functions.

- ``model``        what a rule reads (:class:`Resource`, :data:`UNKNOWN`) and returns (:class:`Violation`);
- ``types``        the Pulumi type tokens the rules look at;
- ``rules``        the rules of one resource: IMDSv2, encryption at rest, no public ingress, data protected,
                   private EKS endpoint, no secrets in user data;
- ``userdata``     user data decoded (base64, gzip, MIME, cloud-config files) and the secrets looked for;
- ``stack_rules``  the rules of the whole stack: a flow log per VPC, default encryption per bucket;
- ``slurm_rules``  the rendered slurm.conf holds only gpucluster's keys and the settings hatch's allow list (which
                   it reads from ``gpucluster.facts.slurm_settings``, a standard-library module of its own);
- ``evaluate``     the rule catalog and the offline plan's resources.

Two callers, one set of rules: the Pulumi policy pack in ``policy/`` (``pulumi preview --policy-pack
policy``) and ``gpucluster policy``, which checks the offline plan. This room imports only the standard
library, PyYAML and that key list, so the pack needs neither Pulumi's AWS provider nor the rest of gpucluster.
"""
