"""Python source shipped inside user data, without its documentation: EC2 takes 16 KB of user data (gzipped), and the
boot helper's docstrings and comments are a third of its bytes.

:func:`without_docs` only removes whole lines — docstrings and comment-only lines — and never changes one, so the
program a node runs is the checked module line for line; ``tests/render/test_pysource.py`` proves the syntax trees
equal (docstrings aside) for every module shipped this way.
"""

from __future__ import annotations

import ast
import functools
import io
import tokenize

_DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def docstring_lines(tree: ast.AST) -> set[int]:
    """Line numbers of every string statement (docstrings, attribute docstrings) in a body that keeps other statements."""
    out: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(node, _DOCUMENTED) or not isinstance(body, list):
            continue
        docs = [
            s for s in body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
        ]
        if len(docs) < len(body):
            for s in docs:
                out.update(range(s.lineno, (s.end_lineno or s.lineno) + 1))
    return out


def comment_lines(source: str) -> set[int]:
    """Line numbers holding nothing but a comment (never inside a string; the shebang line excluded)."""
    code: set[int] = set()
    comments: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comments.add(tok.start[0])
        elif tok.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER):
            code.update(range(tok.start[0], tok.end[0] + 1))
    return {n for n in comments - code if n != 1}


@functools.lru_cache(maxsize=8)
def without_docs(source: str) -> str:
    """``source`` with its docstrings and comment-only lines removed (see the module). Cached: every Slurm node's user
    data (and each plan's size check of it) carries the same boot helper, whose tokenizing took a quarter second."""
    drop = docstring_lines(ast.parse(source)) | comment_lines(source)
    return "".join(line for n, line in enumerate(source.splitlines(keepends=True), start=1) if n not in drop)
