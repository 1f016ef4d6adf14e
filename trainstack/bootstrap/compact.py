"""Make the static node scripts smaller for ECS's 32 KB of user data, without changing what
they do: Python loses its comments and docstrings (a body left empty gets ``pass``), shell
its full-line comments (not the shebang, not shellcheck directives). The templates keep
their documentation; the node gets the same code. Both are checked: the compacted Python
parses to the same AST minus docstrings, and the shell is run by the launch tests."""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize

_SHELL_COMMENT = re.compile(r"^\s*#(?!!|\s*shellcheck\b).*\n", re.M)


def compact_shell(text: str) -> str:
    first, sep, rest = text.partition("\n")
    return first + sep + _SHELL_COMMENT.sub("", rest)


def _docstring_lines(tree: ast.Module) -> dict[int, tuple[int, bool]]:
    """first line -> (last line, the body has nothing else) for every docstring."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(
                    first.value.value, str):
                out[first.lineno] = (first.end_lineno or first.lineno, len(node.body) == 1)
    return out


def compact_python(text: str) -> str:
    tree = ast.parse(text)
    docstrings = _docstring_lines(tree)
    comments: dict[int, int] = {}  # line -> column where a comment starts
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT and tok.start[0] > 1:
            comments[tok.start[0]] = tok.start[1]
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    skip_until = 0
    for number, line in enumerate(lines, start=1):
        if number <= skip_until:
            continue
        if number in docstrings:
            last, alone = docstrings[number]
            skip_until = last
            if alone:
                out.append(line[: len(line) - len(line.lstrip())] + "pass\n")
            continue
        if number in comments:
            line = line[: comments[number]].rstrip()
            if not line.strip():
                continue
            line += "\n"
        out.append(line)
    return "".join(out)  # tests/bootstrap check every compacted script still parses


@functools.lru_cache(maxsize=64)
def compact(name: str, text: str) -> str:
    """The static script ``name`` without comments and docstrings (cached: templates never change
    within a process, and every node of every plan renders the same ones)."""
    if name.endswith(".py"):
        return compact_python(text)
    if text.startswith("#!/bin/bash"):
        return compact_shell(text)
    return text
