# pyright: strict
"""The name grammars both ends share, written once: the control plane's config checks what a user writes against
them, a node's parsers check what they read. ``\\Z``, not ``$``: a name with a trailing newline is not a name."""

from __future__ import annotations

import re

NAME_RE = re.compile(r"^[a-z](?:[a-z0-9-]{0,30}[a-z0-9])?\Z")
"""A gpucluster name (cluster, node group, team, site): 1..32 of a-z, 0-9 and '-', a letter first, no '-' last. It
ends up in AWS resource names, Slurm node and cluster names and Kubernetes labels, so it stays DNS-safe."""

NAME_HINT = "1-32 lowercase letters, digits and '-', starting with a letter and not ending with '-'"

PARTITION_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}\Z")
"""A Slurm partition name (gpucluster's own or a hybrid site's)."""

PARTITION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
"""A partition gpucluster makes for a node group (``slurm.nodeGroups[].partition``): narrower than
:data:`PARTITION_NAME_RE`, which also takes a hybrid site's own names. A pattern string, as the config model's field
takes it (its engine reads ``$`` as the end of the text)."""
