# pyright: strict
"""The head node's accounts reconcile: slurmdbd kept in step with ``/etc/gpucluster/accounts.json``
(:mod:`gpucluster_agents.contract.accounts`): the cluster, the teams' accounts under ``root`` with their fair share,
guaranteed TRES (``GrpTRES``), ``MaxWall``, QOS and default QOS, their users (declared, and members of directory
groups), the QOS gpucluster manages, and users' default accounts.

``gpucluster-agent accounts reconcile [--file PATH] [--dry-run]`` (:mod:`.cli`); the pass itself:
:func:`.reconcile.reconcile`; the diff: :mod:`.plan`; reading slurmdbd: :mod:`.slurmdb`.
"""
