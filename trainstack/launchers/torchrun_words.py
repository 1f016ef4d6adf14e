"""The words torchrun is given for a command: its own arguments, or, for ``python [opts] script``, the
torchrun words of the same program (trainstack launches python scripts with torchrun). Shared by the
torchrun launcher and the parallel-degree checks."""

from __future__ import annotations

from typing import Optional

from ..errors import Problem
from .base import Command, problem

#: python's own options that take a value (the rest take none); ``python -c`` cannot be launched
PYTHON_WITH_VALUE = {"-W", "-X", "-Q"}


def _python_program(args: tuple[str, ...]) -> tuple[Optional[tuple[str, ...]], list[Problem]]:
    """``python [opts] script ARGS`` -> (torchrun's words for it, problems)."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        opt = args[i]
        if opt == "-m":
            if i + 1 >= len(args):
                return None, [problem("`python -m` names no module", "name the module: python -m pkg.train")]
            return ("-m", *args[i + 1:]), []
        if opt.startswith("-c"):
            return None, [problem("`python -c` cannot be launched on every GPU", "put the code in a script")]
        i += 2 if opt in PYTHON_WITH_VALUE else 1
    if i >= len(args):
        return None, [problem("the command runs python without a script", "name the training script")]
    return args[i:], []


def torchrun_words(cmd: Command) -> tuple[Optional[tuple[str, ...]], list[Problem]]:
    """The words after the torchrun-like head (for python: the equivalent torchrun words)."""
    if cmd.tool == "python":
        return _python_program(cmd.args)
    return cmd.args, []
