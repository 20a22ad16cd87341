# pyright: strict
"""The GPU node health program (docs/health.md): NVML readings, the kernel log's XIDs, EFA devices, the
shared file system and short GPU benchmarks, judged against the instance type's facts into one JSON
verdict per run with an action (none, reboot, replace). Runs on GPU nodes: stdlib, plus NVIDIA's
``nvidia-ml-py`` (imported as ``pynvml`` only when a run reads NVML); no PyTorch. Python 3.9+.

Modules, imported down this list only: ``cli`` (command line, exit codes, drain) → ``run`` (a mode
within its budget) → ``gpu_checks`` / ``xid`` / ``host_checks`` / ``deep_checks`` (the checks) →
``nvml`` / ``fake_nvml`` / ``cuda_bench`` (reading the hardware) → ``verdict``, ``config``. Beside them,
``baseline_job``: the re-baseline job the head node's agent submits (``deep`` on every node of the job, the
figures handed back in the job's AdminComment; docs/rebaseline.md).
"""
