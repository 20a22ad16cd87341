"""Deleting a Slurm cluster terminates the instances its node agent launched.

Those instances are not Pulumi resources: without this, ``pulumi destroy`` would leave them running
(about $55/h per p5), and their network interfaces would then block the deletion of the cluster's
security groups and subnets. :class:`AgentTeardown` is a child component whose ``before_delete``
resource hook runs :func:`gpucluster.components.slurm.agent_teardown.teardown`: it terminates every instance with the
cluster tag and the agent's launch-token tag and waits until EC2 shows them terminated.

Why a resource hook (Pulumi >= 3.182; ``ResourceHook`` / ``ResourceHookBinding`` in the pinned 3.272
Python SDK) and not the alternatives:
- pulumi-command's ``local.Command`` with a ``delete`` command would add a provider plugin and a
  dependency, and run a shell command that needs this package and AWS credentials on PATH anyway;
- a dynamic provider pickles its code into the state (a stale copy runs at destroy time, and the
  pickled blob would churn every plan golden);
- a hook is plain code of this program, and the engine itself refuses a ``pulumi destroy`` of a stack
  with delete hooks unless it runs with ``--run-program`` (so the teardown cannot be skipped by
  accident). The cost, documented in the README: ``pulumi destroy --run-program``.

Ordering: the component depends on the node groups' launch templates, the node instance profile and
the security groups and subnets (through its inputs), so Pulumi deletes it, running the hook, before
any of them. A hook error fails the deletion: better a failed destroy than instances left running.
"""

from __future__ import annotations

from collections.abc import Sequence

import pulumi

TOKEN = "gpucluster:slurm:AgentTeardown"


def teardown_hook(name: str, cluster: str, region: str, profile: str | None) -> pulumi.ResourceHook:
    """The named ``before_delete`` hook (delete hooks must be named, so the engine finds them again)."""

    def run(_args: pulumi.ResourceHookArgs) -> None:
        from gpucluster.components.slurm.agent_teardown import teardown  # boto3 is only needed when a cluster is deleted

        done = teardown(cluster, region, profile=profile)
        pulumi.log.info(f"terminated {len(done)} agent instance(s) of Slurm cluster {cluster}")

    return pulumi.ResourceHook(f"{name}-agent-teardown", run)


class AgentTeardown(pulumi.ComponentResource):
    """The component whose deletion terminates the agent's instances of a cluster (no children)."""

    hook: pulumi.ResourceHook
    """The ``before_delete`` hook bound to it (kept for tests; Python-only)."""

    def __init__(
        self,
        name: str,
        *,
        cluster: str,
        region: str,
        after: Sequence[pulumi.Resource],
        network: pulumi.Inputs,
        parent: pulumi.Resource,
    ) -> None:
        """``cluster``: the cluster tag's value of the instances it terminates; ``region``: their region.
        ``after``: resources it must be deleted before (launch templates, instance profile); ``network``:
        the subnet and security group ids, recorded as its inputs so it is deleted before those too."""
        self.hook = teardown_hook(name, cluster, region, pulumi.Config("aws").get("profile"))
        binding = pulumi.ResourceHookBinding(before_delete=[self.hook])
        super().__init__(
            TOKEN,
            f"{name}-agent-teardown",
            {"clusterName": cluster, "region": region, **network},
            pulumi.ResourceOptions(parent=parent, depends_on=list(after), hooks=binding),
        )
        self.register_outputs({})
