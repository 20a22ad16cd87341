# pyright: strict
"""What a Slurm node runs while it boots: ``helper``, the boot helper installed as ``gpucluster-aws`` (munge key,
the agent's package, node name, the boot health check). The helper is shipped as one self-contained file
(``gpucluster.render.slurm.agent`` strips its docs), so it imports nothing of this package.
"""
