"""One constructor per component, over a module-level builder.

Each component's ``__init__(name, args, opts)`` turns its Args into resolved values (``components/_shared/edge.py``),
registers itself and calls its family's builder (``build_network(parent, name, spec, wiring)``, …), which creates
the children under the parent it is given and returns what it made. ``GpuCluster`` calls the same builders with the
values it resolved for the whole stack, under a :func:`part` of the component's type: same type, same name, same
parent, so every URN is what the component alone would give it.
"""

from __future__ import annotations

import pulumi


def part(
    token: str, name: str, parent: pulumi.Resource | None = None, opts: pulumi.ResourceOptions | None = None
) -> pulumi.ComponentResource:
    """A component resource of type ``token`` named ``name`` under ``parent`` (the stack when none): where GpuCluster's
    builders put a part, and the stack program its GpuCluster."""
    return pulumi.ComponentResource(token, name, None, pulumi.ResourceOptions.merge(pulumi.ResourceOptions(parent=parent), opts))


def adopt(component: pulumi.ComponentResource, parts: object) -> None:
    """Give ``component`` the public attributes of what its builder made (its outputs and Python-only parts)."""
    for key, value in vars(parts).items():
        if not key.startswith("_"):
            setattr(component, key, value)
