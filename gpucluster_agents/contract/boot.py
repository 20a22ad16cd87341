# pyright: strict
"""The boot helper's config (``/usr/local/sbin/gpucluster-aws.json``) and the health program's boot gate, as the
control plane writes them.

Defined in :mod:`gpucluster_agents.boot.helper`, not here: the helper is shipped as one self-contained file (it is what
installs this package, so it can import nothing of it), and its parser must travel with it. This module is the
contract's face of that one definition: the control plane imports it from here, never from ``boot``."""

from __future__ import annotations

from ..boot.helper import HEALTH_BOOT_FAULT as HEALTH_BOOT_FAULT
from ..boot.helper import HEALTH_BOOT_TIMEOUT as HEALTH_BOOT_TIMEOUT
from ..boot.helper import HEALTH_MAIN as HEALTH_MAIN
from ..boot.helper import BootConfig as BootConfig
from ..boot.helper import BootConfigError as BootConfigError
from ..boot.helper import parse_config as parse_config
