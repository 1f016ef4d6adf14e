"""What every launcher module shares: the parsed ``job.command``, the rendered launch, and the
problems that make a command impossible to launch (one message, wherever it is found)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..errors import InputError, Problem
from .topology import NodeValues, Topology
from .words import Word

FIELD = "job.command"
#: the environment names the topology reaches tools through (LLaMA-Factory, ms-swift, scripts)
TOPOLOGY_ENV = ("NNODES", "NODE_RANK", "NPROC_PER_NODE", "MASTER_ADDR", "MASTER_PORT")
#: names torch.distributed and PAI-DLC give a meaning of their own
DISTRIBUTED_ENV = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK",
                   "TORCHELASTIC_RUN_ID", "FORCE_TORCHRUN")


@dataclass(frozen=True)
class Command:
    """``job.command`` split as a shell splits words, never evaluated."""

    tool: str                        # torchrun | python | accelerate | deepspeed | llamafactory | swift | tune | script
    head: tuple[str, ...]            # the tool's words as written (``accelerate launch``)
    args: tuple[str, ...]            # everything after them
    env: tuple[tuple[str, str], ...] = ()  # leading NAME=value words


@dataclass(frozen=True)
class Launch:
    """One node's launch: the command line, the environment only the trainer sees, and any
    file the tool reads (DeepSpeed's hostfile)."""

    tool: str
    argv: tuple[Word, ...]
    env: tuple[tuple[str, Word], ...] = ()
    hostfile: Optional[str] = None        # DeepSpeed hostfile text (``HOST slots=N`` lines)
    user_env: tuple[tuple[str, str], ...] = field(default=())  # the command's leading NAME=value words


class LaunchError(InputError):
    """``job.command`` cannot be launched on this plan (exit 2). Not a ValueError on purpose:
    it reaches the user unchanged from inside the Pulumi program, with the same lines as
    ``trainstack validate``."""

    def __init__(self, problems: list[Problem]):
        super().__init__(f"{FIELD}: {len(problems)} problem(s)", problems=problems)


def problem(message: str, fix: str, given: Optional[str] = None) -> Problem:
    """A problem with job.command: what is wrong, then how to fix it. ``given`` is the
    offending option only, never the whole command (it may hold other people's secrets)."""
    return Problem(path=FIELD, message=f"{message}; fix: {fix}", given=given, has_given=given is not None)


@dataclass(frozen=True)
class Context:
    """The topology a command is checked against; ``None`` topology: not known yet (a profile
    that does not resolve), so only the plan-independent rules apply."""

    topology: Optional[Topology]

    @property
    def known(self) -> bool:
        return self.topology is not None

    def values(self, rank: Optional[int]) -> NodeValues:
        assert self.topology is not None
        return self.topology.node(rank)
