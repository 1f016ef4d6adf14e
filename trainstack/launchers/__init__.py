"""Launchers: ``job.command`` plus the plan's topology -> the command line, environment and
files each tool documents (torchrun, python, ``accelerate launch``, ``deepspeed``,
``llamafactory-cli train``, ``swift sft|pt|rlhf``, ``tune run``, torchtitan through torchrun,
any script), for an ECS node or a PAI-DLC pod. Pure: no I/O but reading ``data/``.

One rule, one message: :func:`check_command` is what ``trainstack validate`` runs and what
:func:`render_launch` / :func:`dlc_command` raise (as :class:`LaunchError`) at plan time. With the
plan known it also holds the command's intent to the plan (launchers/intent.py: options that restate
the batch, the accumulation when ``training.global_batch_size`` is set) and accepts the tools' own
README forms of the topology when they agree with it (launchers/env_forms.py).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

from ..errors import Problem
from . import accelerate, deepspeed, env_forms, environment, intent, torchrun
from .base import DISTRIBUTED_ENV, FIELD, TOPOLOGY_ENV, Command, Context, Launch, LaunchError, problem
from .command import parse
from .topology import Degrees, Topology, topology_from_plan
from .words import Word, assignment, lit, shell_line, shell_word, unsafe_text

__all__ = ["Degrees", "FIELD", "Launch", "LaunchError", "RESERVED_ENV", "RESERVED_ENV_PREFIXES", "Topology",
           "check_command", "check_degrees", "command_degrees", "dlc_command", "launch_notes", "render_launch",
           "topology_from_plan"]

_TOOLS = {"torchrun": torchrun, "python": torchrun, "tune": torchrun, "accelerate": accelerate,
          "deepspeed": deepspeed, "llamafactory": environment, "swift": environment, "script": environment}
#: the tools a multi-node self-healing plan can launch (torchrun elastic)
ELASTIC_TOOLS = ("torchrun", "python")
#: names a job may not set: the topology every launcher reads and torch.distributed's own
RESERVED_ENV = frozenset(TOPOLOGY_ENV + DISTRIBUTED_ENV)
#: torchrun reads every option also from PET_<OPTION> (e.g. PET_NNODES)
RESERVED_ENV_PREFIXES = ("PET_",)
#: where the DeepSpeed hostfile lives in a PAI-DLC pod (an ECS node's is under /etc/trainstack)
DLC_DEEPSPEED_HOSTFILE = "/tmp/trainstack-deepspeed-hostfile"


def reserved(name: str) -> bool:
    return name in RESERVED_ENV or name.startswith(RESERVED_ENV_PREFIXES)


def _parsed(command: str) -> tuple[Optional[Command], list[Problem]]:
    if why := unsafe_text(command):
        return None, [problem(f"the command {why}", "remove that character")]
    parsed = parse(command)
    if isinstance(parsed, list):
        return None, parsed
    # the tools' README forms (NPROC_PER_NODE=8 swift ...) are judged against the plan: env_forms
    problems = [problem(f"the command sets {name}, which trainstack sets from the plan for every launcher",
                        f"remove {name}=...", name) for name, _ in parsed.env
                if reserved(name) and not (name in env_forms.FORMS and name != "FORCE_TORCHRUN")
                and not (name == "FORCE_TORCHRUN" and parsed.tool == "llamafactory")]
    return parsed, problems


def check_command(command: str, topology: Optional[Topology]) -> list[Problem]:
    """Everything that makes ``command`` impossible to launch on ``topology`` (None: the plan
    is not known, so only the rules that need no plan)."""
    parsed, problems = _parsed(command)
    if parsed is None:
        return problems
    if topology is not None and topology.elastic is not None and parsed.tool not in ELASTIC_TOOLS:
        problems.append(problem(
            f"resources.self_healing on a {topology.nnodes}-node plan replaces a lost node through torchrun's elastic "
            f"rendezvous, and {' '.join(parsed.head) or parsed.tool} is not launched by torchrun",
            "launch with torchrun (or python script.py), or set resources.self_healing: false (or "
            "resources.max_nodes: 1)"))
        return problems
    problems += env_forms.problems(parsed, topology)
    problems += _TOOLS[parsed.tool].check(parsed, Context(topology))
    if topology is not None and topology.batch is not None:
        problems += intent.restated_problems(parsed, topology.batch) + intent.accumulation_problems(
            parsed, topology.batch)
    return problems


def command_degrees(command: str) -> frozenset[str]:
    """The parallel degrees (tensor, pipeline, context, expert) ``command``'s program takes from its
    command line (launchers/parallel.py); none for a command that cannot be launched."""
    from . import parallel

    parsed, problems = _parsed(command)
    return parallel.degrees_taken(parsed) if parsed is not None and not problems else frozenset()


def check_degrees(command: str, degrees: Degrees) -> list[Problem]:
    """What refuses ``degrees`` (the profile's own, before a plan) for ``command``."""
    from . import parallel

    parsed, problems = _parsed(command)
    if parsed is None or problems:
        return []  # check_command reports it
    return parallel.refused(parsed, degrees)


def launch_notes(command: str, topology: Optional[Topology]) -> list[str]:
    """What trainstack cannot see about how ``command`` takes the plan's batch (launchers/intent.py)."""
    parsed, problems = _parsed(command)
    if parsed is None or problems or topology is None:
        return []
    return intent.notes(parsed, topology.batch)


def render_launch(command: str, topology: Topology, rank: Optional[int] = None, *,
                  deepspeed_hostfile: str = DLC_DEEPSPEED_HOSTFILE,
                  gradient_accumulation_steps: Optional[int] = None) -> Launch:
    """The launch of node ``rank`` (ECS) or of any pod (DLC, ``rank`` None); LaunchError with
    the same problems as :func:`check_command` when it cannot work. (``gradient_accumulation_steps``
    is accepted for existing callers and not read: the plan's accumulation travels in
    ``topology.batch``, and reaches the trainer only where launchers/intent.py says.)"""
    problems = check_command(command, topology)
    if problems:
        raise LaunchError(problems)
    parsed, _ = _parsed(command)
    assert parsed is not None
    ctx = Context(topology)
    module = _TOOLS[parsed.tool]
    if module is deepspeed:
        launch = deepspeed.render(parsed, ctx, rank, deepspeed_hostfile)
    else:
        launch = module.render(parsed, ctx, rank)
    words, env = intent.accumulation_words(parsed, topology.batch)
    return replace(launch, argv=launch.argv + tuple(lit(w) for w in words),
                   env=launch.env + tuple((k, lit(v)) for k, v in env), user_env=env_forms.kept(parsed, topology))


def dlc_command(command: str, topology: Topology, gradient_accumulation_steps: Optional[int] = None) -> str:
    """The PAI-DLC ``UserCommand`` (a POSIX shell line run in every pod) that launches
    ``command`` with the pod's topology: PAI's WORLD_SIZE (pods) and RANK (pod index) become
    the node count and node rank, its MASTER_ADDR/MASTER_PORT the rendezvous."""
    if topology.platform != "dlc":
        raise ValueError("dlc_command needs a PAI-DLC topology")
    launch = render_launch(command, topology, deepspeed_hostfile=DLC_DEEPSPEED_HOSTFILE,
                           gradient_accumulation_steps=gradient_accumulation_steps)
    env: list[tuple[str, Word]] = [(k, lit(v)) for k, v in launch.user_env] + list(launch.env)
    parts = []
    if env:
        parts.append("export " + " ".join(assignment(k, w).rstrip("\n") for k, w in env) + ";")
    if launch.hostfile:
        lines = " ".join(shell_word(lit(line)) for line in launch.hostfile.splitlines())
        parts.append(f"printf '%s\\n' {lines} > {shell_word(lit(DLC_DEEPSPEED_HOSTFILE))} &&")
    parts.append(shell_line(launch.argv))
    return " ".join(parts)
