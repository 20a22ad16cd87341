"""Which environment variables a node group's ``ncclEnv`` may set: the fabric's, and none that becomes code.

``ncclEnv`` reaches every job task on the group's nodes (the Slurm TaskProlog's environment, the Kubernetes example
job's pod spec) and every non-root login shell (``/etc/profile.d/gpucluster-nccl.sh``). A valid variable *name* can
still turn the value into code there: ``LD_PRELOAD`` loads a library into every program, ``PROMPT_COMMAND`` and ``PS1``
run at every interactive prompt, ``BASH_ENV``/``ENV`` are sourced by every later shell, ``PYTHONSTARTUP``,
``PERL5OPT`` and ``NODE_OPTIONS`` run code in every interpreter. So the names are checked twice:

1. **Allowed prefixes** (:data:`FABRIC_PREFIXES`), from what AWS's awsome-distributed-training job scripts and
   container images set for NCCL over EFA (``NCCL_``, ``FI_``, ``OFI_NCCL_``, ``CUDA_``, ``TORCH_NCCL_``,
   ``RDMAV_FORK_SAFE``, ``GLOO_SOCKET_IFNAME``, ``OMPI_MCA_btl``/``pml``, ``NVSHMEM_`` …) and what the site fabrics use
   (``UCX_``, ``MLX5_``). Anything else belongs in the job's own environment.
2. **Refused names** that win over the prefixes (:func:`dangerous_name`): every loader, shell, interpreter and
   resolver variable, and, inside the fabric prefixes, the ones that name code to load or run — search paths
   (``FI_PROVIDER_PATH``, ``CUDA_INJECTION64_PATH``: any name ending in ``PATH``, ``_DIR``, ``_DIRS``, ``_HOME``),
   Open MPI's program and component parameters (``OMPI_MCA_plm_rsh_agent``, ``…_component_path``), NCCL's
   ``NCCL_CONF_FILE`` (a file of further settings) and the device selection Slurm and the device plugin own
   (``CUDA_VISIBLE_DEVICES``).

Variables that name a plugin library (``NCCL_NET_PLUGIN``, ``NCCL_TUNER_PLUGIN``, ``NCCL_PROFILER_PLUGIN``,
``NCCL_ENV_PLUGIN``: any ``*_PLUGIN``) keep their value checked too: a plugin name (NCCL then searches the library
path) or an absolute path in a system install tree (:data:`PLUGIN_TREES`), never a shared file system another user
could write to.

``NVIDIA_`` is deliberately not a fabric prefix: ``NVIDIA_VISIBLE_DEVICES=all`` in a pod's environment hands the pod
every GPU of its node when the container toolkit honours the variable for unprivileged containers (its default).
"""

from __future__ import annotations

import re

from gpucluster.config.base import FIX_MARK

FABRIC_PREFIXES = (
    "NCCL_",
    "FI_",
    "OFI_NCCL_",
    "CUDA_",
    "TORCH_NCCL_",
    "TORCH_DISTRIBUTED_",
    "GLOO_SOCKET_",
    "NVSHMEM_",
    "UCX_",
    "RDMAV_",
    "MLX5_",
    "OMPI_MCA_",
)
"""Name prefixes ``ncclEnv`` takes: NCCL, libfabric and aws-ofi-nccl, CUDA, PyTorch's NCCL and distributed settings,
Gloo's bootstrap interface, NVSHMEM, UCX, rdma-core and mlx5, Open MPI's MCA parameters."""

SHELL_NAMES = frozenset(
    {
        "PATH", "IFS", "ENV", "BASH_ENV", "PROMPT_COMMAND", "PS0", "PS1", "PS2", "PS3", "PS4", "SHELLOPTS", "BASHOPTS",
        "CDPATH", "GLOBIGNORE", "HOME", "SHELL", "USER", "LOGNAME", "TMPDIR", "MAIL", "MAILPATH", "HISTFILE", "INPUTRC",
        "ZDOTDIR", "TERMINFO", "HOSTALIASES", "LOCALDOMAIN", "RES_OPTIONS", "GCONV_PATH", "NLSPATH", "LOCPATH", "TZDIR",
        "GLIBC_TUNABLES", "NODE_OPTIONS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "CUDA_VISIBLE_DEVICES", "NCCL_CONF_FILE",
    }
)  # fmt: skip
"""Names refused outright: shell start-up and prompts, the resolver and glibc's own loaders, interpreters' option
variables, and the two fabric names above that are not tuning (a settings file, the job's device list)."""

REFUSED_PREFIXES = (
    "LD_", "DYLD_", "BASH_FUNC_", "PYTHON", "PERL", "RUBY", "LUA_", "TCL", "MALLOC_", "GPUCLUSTER_", "SLURM_", "SPANK_",
)  # fmt: skip
"""Name prefixes refused outright: the dynamic loader (``LD_PRELOAD``, ``LD_AUDIT``, ``LD_LIBRARY_PATH``), exported
shell functions, interpreters' start-up and module paths, glibc's malloc hooks, and the variables gpucluster's and
Slurm's own programs read."""

REFUSED_SUFFIXES = ("PATH", "_DIR", "_DIRS", "_HOME", "_PRELOAD")
"""Name endings refused even under a fabric prefix: search paths for code (``FI_PROVIDER_PATH``, ``UCX_MODULE_DIR``)."""

MPI_CODE_WORDS = ("agent", "path", "prefix", "component", "exec", "cmd", "command")
"""Open MPI MCA parameters naming a program to run or a place to load components from (``plm_rsh_agent``,
``mca_base_component_path``, ``orte_prefix``): refused."""

PLUGIN_TREES = ("/opt/amazon/", "/opt/aws-ofi-nccl/", "/usr/lib/", "/usr/lib64/", "/usr/local/lib/")
"""Where a ``*_PLUGIN`` path may point: root-owned install trees (the EFA installer's and the DLAMI's ``/opt/amazon/…``,
an aws-ofi-nccl build's ``/opt/aws-ofi-nccl/…``, the distribution's library directories), none of them a place a
shared file system may be mounted."""

PLUGIN_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
FIX = (
    "set it in the job's own environment instead (sbatch --export, the job script, the pod spec); ncclEnv takes only "
    "fabric tuning variables: " + ", ".join(f"{p}*" for p in FABRIC_PREFIXES)
)


def dangerous_name(name: str) -> str | None:
    """Why ``name`` must not be set for every task and login shell of a node, or None."""
    upper = name.upper()
    if upper in SHELL_NAMES:
        return "it changes how shells start, prompt or resolve, or what a job runs on"
    if upper.startswith(REFUSED_PREFIXES):
        return "it changes which code programs load or run (loader, shell-function, interpreter or scheduler variable)"
    if upper.endswith(REFUSED_SUFFIXES):
        return "it is a search path for code or files, which would let whoever can write there run code in every job"
    if upper.startswith("OMPI_MCA_") and any(word in name.lower() for word in MPI_CODE_WORDS):
        return "this Open MPI parameter names a program to run or a place to load components from"
    return None


def plugin_value_problem(name: str, value: str) -> str | None:
    """Why ``value`` is not a safe library for the plugin variable ``name`` (``NCCL_TUNER_PLUGIN``), or None."""
    if not name.upper().endswith("_PLUGIN") or not value or PLUGIN_NAME_RE.fullmatch(value):
        return None
    parts = value.split("/")
    if value.startswith(PLUGIN_TREES) and not {".", ".."} & set(parts) and "" not in parts[1:]:
        return None
    return (
        f"{value!r} is not a plugin name or a library under {', '.join(PLUGIN_TREES)}: a library elsewhere (a shared "
        "file system, /tmp, a home directory) could be replaced by another user and would run in every job"
    )


def check_fabric_env(env: dict[str, str], what: str) -> dict[str, str]:
    """Refuse names that are not fabric variables or that become code, and unsafe plugin paths (see the module)."""
    for name, value in env.items():
        why = dangerous_name(name)
        if why:
            raise ValueError(f"{what} name {name!r} is refused: {why}.{FIX_MARK}{FIX}")
        if not name.startswith(FABRIC_PREFIXES):
            raise ValueError(
                f"{what} name {name!r} is not a fabric variable (it would reach every job and login shell).{FIX_MARK}{FIX}"
            )
        problem = plugin_value_problem(name, value)
        if problem:
            raise ValueError(
                f"{what} {name} = {problem}.{FIX_MARK}use a plugin name NCCL finds on the system library path (e.g. ofi) or an "
                "absolute path such as /opt/amazon/ofi-nccl/lib/libnccl-ofi-tuner.so"
            )
    return env
