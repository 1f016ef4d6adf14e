"""Turn ``job.command`` into torchrun arguments without ever evaluating it as shell.

The command is split the way a shell splits words (quotes respected) and each word is later
written shell-quoted, so ``$(...)``, ``;`` or ``$VAR`` in a profile stay literal text.
Every job runs under torchrun with the Plan's topology:

- ``python [opts] train.py ARGS`` -> ``torchrun <plan> train.py ARGS`` (torchrun runs the
  script with the same interpreter; python's own options are dropped)
- ``python -m pkg.mod ARGS`` -> ``torchrun <plan> -m pkg.mod ARGS``
- ``torchrun [opts] train.py ARGS`` -> the user's torchrun options are kept, except the
  topology ones (nnodes, nproc-per-node, node-rank, master-*, rdzv-*, standalone), which the
  Plan decides
- anything else (``bash run.sh``) -> ``torchrun <plan> --no-python bash run.sh``: one copy
  per GPU, with RANK/LOCAL_RANK/WORLD_SIZE set
- leading ``NAME=value`` words become environment variables of the job.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

_PYTHON = re.compile(r"^(?:.*/)?python(?:3(?:\.\d+)?)?$")
_TORCHRUN = re.compile(r"^(?:.*/)?torchrun$")
_ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
_LAUNCHERS = {"deepspeed", "accelerate", "mpirun", "srun", "horovodrun"}

#: torchrun options the Plan sets; the same options in job.command are dropped
_MANAGED = {f"--{name}" for base in ("nnodes", "nproc-per-node", "node-rank", "master-addr", "master-port",
                                     "rdzv-backend", "rdzv-endpoint", "rdzv-id", "rdzv-conf", "standalone")
            for name in (base, base.replace("-", "_"))}
#: torchrun options that take no value
_NO_VALUE = {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m", "--module"}
#: python options that take a value
_PY_WITH_VALUE = {"-W", "-X", "-Q"}


@dataclass(frozen=True)
class TrainerCommand:
    torchrun_options: tuple[str, ...] = ()
    program: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    dropped: tuple[str, ...] = ()  # the user's topology options the Plan overrides


def parse_command(command: str) -> TrainerCommand:
    """Split ``job.command`` into torchrun options, program and environment (see module doc)."""
    try:
        words = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"job.command is not valid shell quoting ({exc}): {command!r}") from None
    env: dict[str, str] = {}
    while words and (m := _ASSIGNMENT.match(words[0])):
        env[m.group(1)] = m.group(2)
        words = words[1:]
    if not words:
        raise ValueError("job.command has no program to run")
    head = words[0]
    if head.rsplit("/", 1)[-1] in _LAUNCHERS:
        raise ValueError(f"job.command starts with {head!r}, itself a launcher; trainstack launches with "
                         "torchrun, so run the script directly (`python train.py ...`): DeepSpeed, "
                         "Accelerate and Lightning read torchrun's environment")
    if _TORCHRUN.match(head):
        return _from_torchrun(words[1:], env)
    if _PYTHON.match(head) and words[1:3] == ["-m", "torch.distributed.run"]:
        return _from_torchrun(words[3:], env)
    if _PYTHON.match(head):
        return _from_python(words[1:], env)
    return TrainerCommand(("--no-python",), tuple(words), env)


def _from_python(args: list[str], env: dict[str, str]) -> TrainerCommand:
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        opt = args[i]
        if opt == "-m":
            if i + 1 >= len(args):
                raise ValueError("job.command: `python -m` without a module")
            return TrainerCommand(("-m",), tuple(args[i + 1:]), env)
        if opt.startswith("-c"):
            raise ValueError("job.command: `python -c` is not supported; put the code in a script")
        i += 2 if opt in _PY_WITH_VALUE else 1
    if i >= len(args):
        raise ValueError("job.command runs python without a script")
    return TrainerCommand((), tuple(args[i:]), env)


def _from_torchrun(args: list[str], env: dict[str, str]) -> TrainerCommand:
    kept: list[str] = []
    dropped: list[str] = []
    i = 0
    while i < len(args) and args[i].startswith("-"):
        name, eq, _ = args[i].partition("=")
        takes_value = not eq and name not in _NO_VALUE
        words = args[i:i + 2] if takes_value else args[i:i + 1]
        (dropped if name in _MANAGED else kept).extend(words)
        i += len(words)
    if i >= len(args):
        raise ValueError("job.command runs torchrun without a script")
    return TrainerCommand(tuple(kept), tuple(args[i:]), env, tuple(dropped))
