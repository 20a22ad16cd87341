"""Field descriptions for Args that inherit their fields from the generated config types.

Pulumi's component analyzer reads a field's description from the source of the class it is analyzing
(the string literal under the field). A component's Args inherit most fields from a generated config
type (``class NetworkArgs(NetworkConfig, total=False)``), so upstream finds no description for them: the
literal sits in ``components/_shared/config_types.py``, under ``NetworkConfig``. On Python 3.11 a TypedDict
keeps no record of its typed-dict bases (no ``__orig_bases__``, and its ``__mro__`` is only
``(cls, dict, object)``), so the bases are found the way a reader finds them: in the class statement's
source, named in its module's globals.

This works around an upstream limitation of ``pulumi.provider.experimental.analyzer.Analyzer``;
:func:`install` puts the subclass where ``pulumi.provider.experimental.component`` looks ``Analyzer`` up
when a ``ComponentProvider`` is built (``component_provider_host`` builds one too).
"""

import ast
import inspect
import sys
import textwrap
import typing
from typing import Any

from pulumi.provider.experimental import component as _component
from pulumi.provider.experimental.analyzer import Analyzer


def typed_dict_bases(typ: type) -> list[type]:
    """The typed-dict classes named as bases in ``typ``'s class statement, in order; [] when the source
    cannot be read or ``typ`` is not a typed dict."""
    if not typing.is_typeddict(typ):
        return []
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(typ)))
    except (OSError, TypeError, SyntaxError):
        return []
    statement = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == typ.__name__), None)
    if statement is None:
        return []
    scope = vars(sys.modules[typ.__module__]) if typ.__module__ in sys.modules else {}
    bases = [_lookup(base, scope) for base in statement.bases]
    return [b for b in bases if isinstance(b, type) and b is not typ and typing.is_typeddict(b)]


def _lookup(node: ast.expr, scope: dict[str, Any]) -> object:
    """A base written ``Name`` or ``module.Name``, looked up in the defining module's globals."""
    if isinstance(node, ast.Name):
        return scope.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _lookup(node.value, scope)
        return getattr(owner, node.attr, None) if owner is not None else None
    return None


class InheritingAnalyzer(Analyzer):
    """The upstream analyzer, with descriptions of inherited typed-dict fields found in the base that
    declares them (recursively, nearest base first)."""

    def get_docstring(self, typ: type, name: str) -> str | None:
        found = super().get_docstring(typ, name)
        if found is not None:
            return found
        for base in typed_dict_bases(typ):
            found = self.get_docstring(base, name)
            if found is not None:
                return found
        return None


def install() -> None:
    """Make every ``ComponentProvider`` (and so ``component_provider_host``) analyze with
    :class:`InheritingAnalyzer`. Fails loudly when a pulumi upgrade moves the lookup point."""
    if getattr(_component, "Analyzer", None) not in (Analyzer, InheritingAnalyzer):
        raise RuntimeError(
            "pulumi.provider.experimental.component no longer looks up Analyzer by name: "
            "gpucluster.tools.provider.docstrings.install() needs updating for this pulumi version"
        )
    _component.Analyzer = InheritingAnalyzer  # type: ignore[misc]  # the documented workaround above
