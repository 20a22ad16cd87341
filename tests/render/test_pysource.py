"""Python shipped in user data loses its docstrings and comment lines, nothing else (gpucluster/render/pysource.py):
the syntax tree of what a node runs equals the checked module's with its string statements taken out."""

from __future__ import annotations

import ast

from gpucluster.render.pysource import without_docs
from gpucluster.render.slurm.agent import aws_helper
from gpucluster_agents.boot import helper as boot

TRICKY = '''#!/usr/bin/python3
"""Module docstring."""
# a comment line
X = 1  # an inline comment stays
TEXT = """
# not a comment: inside a string
"""


def only_doc():
    """A body of nothing but its docstring keeps it (removing it would leave no body)."""


class C:
    """Class docstring."""

    a: int = 1
    """An attribute docstring."""

    def f(self):
        # a comment
        return "#"  # '#' in a string
'''


def _without_strings(tree: ast.AST) -> str:
    """``ast.dump`` of ``tree`` without the string statements :func:`without_docs` removes."""
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            kept = [
                s
                for s in body
                if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str))
            ]
            node.body = kept or body  # type: ignore[attr-defined]
    return ast.dump(tree)


def test_the_shipped_helper_is_the_module_without_its_documentation():
    source = open(boot.__file__).read()
    shipped = aws_helper()
    assert _without_strings(ast.parse(shipped)) == _without_strings(ast.parse(source))
    assert shipped.startswith("#!/usr/bin/python3 -I\n") and len(shipped) < 0.9 * len(source)  # isolated: no cwd, no PYTHON*
    assert all(line in source.splitlines() for line in shipped.splitlines()), "a line was changed, not only removed"


def test_only_documentation_goes():
    out = without_docs(TRICKY)
    assert _without_strings(ast.parse(out)) == _without_strings(ast.parse(TRICKY))
    assert "# not a comment: inside a string" in out and "X = 1  # an inline comment stays" in out
    assert "A body of nothing but its docstring" in out
    for gone in ("Module docstring", "# a comment line", "Class docstring", "An attribute docstring", "        # a comment\n"):
        assert gone not in out, gone
    assert out.startswith("#!/usr/bin/python3\n")
