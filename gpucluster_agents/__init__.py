# pyright: strict
"""gpucluster node agents: programs slurmctld runs on the head node.

ResumeProgram / SuspendProgram / ResumeFailProgram for EC2 node groups (CreateFleet instant,
tags, never leaking an instance), plus topology.conf from EC2 instance topology.
boto3 and the standard library only; Python 3.9+. Entry point: ``gpucluster_agents.cli:main``.
"""

__version__ = "0.1.0"
