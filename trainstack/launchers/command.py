"""``job.command`` -> which launcher it is, split as a shell splits words and never evaluated.

The first word (after leading ``NAME=value`` assignments, which become the trainer's
environment) names the tool: ``torchrun`` or ``python -m torch.distributed.run``;
``python``; ``accelerate launch``; ``deepspeed``; ``llamafactory-cli``/``lmf``; ``swift``;
``tune run``; anything else is a program run once per node. Launchers that need SSH or a
scheduler between the nodes (mpirun, srun, pdsh, horovodrun) cannot work and are refused.
"""

from __future__ import annotations

import re
import shlex
from typing import Union

from ..errors import Problem
from .base import Command, problem

_PYTHON = re.compile(r"^python(?:3(?:\.\d+)?)?$")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_NEEDS_SSH = {"mpirun", "mpiexec", "srun", "pdsh", "horovodrun", "ds_ssh"}


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def parse(command: str) -> Union[Command, list[Problem]]:
    try:
        words = shlex.split(command)
    except ValueError as exc:
        return [problem(f"the command is not valid shell quoting ({exc})", "balance its quotes")]
    env: list[tuple[str, str]] = []
    while words and (m := _ASSIGNMENT.match(words[0])):
        env.append((m.group(1), m.group(2)))
        words = words[1:]
    if not words:
        return [problem("the command has no program to run", "name the program, e.g. python train.py")]
    head, rest, env_t = _base(words[0]), tuple(words[1:]), tuple(env)
    if head in _NEEDS_SSH:
        return [problem(f"{head} starts processes on other machines over SSH or a scheduler, which trainstack "
                        "nodes do not have", "start the script directly (python train.py, torchrun, accelerate "
                        "launch or deepspeed): trainstack starts it on every node", head)]
    if head == "torchrun":
        return Command("torchrun", (words[0],), rest, env_t)
    if _PYTHON.match(head):
        if rest[:2] in (("-m", "torch.distributed.run"),):
            return Command("torchrun", (words[0], "-m", "torch.distributed.run"), rest[2:], env_t)
        if rest[:2] == ("-m", "torch.distributed.launch"):
            return [problem("torch.distributed.launch is deprecated and passes --local-rank to the script",
                            "use torchrun (or python -m torch.distributed.run)")]
        return Command("python", (words[0],), rest, env_t)
    if head == "accelerate":
        if rest[:1] != ("launch",):
            return [problem(f"`accelerate {rest[0] if rest else ''}` is not a launch", "use `accelerate launch ...`")]
        return Command("accelerate", (words[0], "launch"), rest[1:], env_t)
    if head == "deepspeed":
        return Command("deepspeed", (words[0],), rest, env_t)
    if head in ("llamafactory-cli", "lmf"):
        if not rest:
            return [problem(f"{head} needs a subcommand", f"use `{head} train CONFIG.yaml`")]
        return Command("llamafactory", (words[0], rest[0]), rest[1:], env_t)
    if head == "swift":
        if not rest:
            return [problem("swift needs a subcommand", "use `swift sft ...`")]
        return Command("swift", (words[0], rest[0]), rest[1:], env_t)
    if head == "tune":
        if rest[:1] != ("run",):
            return [problem(f"`tune {rest[0] if rest else ''}` is not a training run", "use `tune run RECIPE --config CONFIG`")]
        return Command("tune", (words[0], "run"), rest[1:], env_t)
    return Command("script", (words[0],), rest, env_t)
