"""torchrun, and the commands that become torchrun: ``python script.py`` (one process per
GPU under torchrun, which runs the script with the same interpreter) and ``tune run``
(torchtune copies torchrun's options into its own parser, data/tune.yaml).

torchrun gets the topology as its documented flags (data/torchrun.yaml): ``--nnodes``,
``--nproc-per-node``, ``--node-rank``, ``--master-addr``, ``--master-port`` with the default
static rendezvous, plus ``--rdzv-conf timeout=...`` unless the user gives ``--rdzv-conf``.
``tune run`` forces ``--standalone`` unless it sees ``--rdzv-endpoint``, so it gets
``--rdzv-endpoint node0:port`` instead of the address and port flags.
"""

from __future__ import annotations

from typing import Optional

from ..errors import Problem
from .base import Command, Context, Launch, problem
from . import parallel
from .managed import Forbidden, option_words, split_options
from .options import facts, scan
from .torchrun_words import torchrun_words
from .words import Word, lit

ROLES = {"--nnodes": "nnodes", "--nproc-per-node": "nproc", "--node-rank": "node_rank",
         "--master-addr": "master_addr", "--master-port": "master_port", "--rdzv-backend": "rdzv_backend",
         "--rdzv-endpoint": "endpoint", "--standalone": "standalone"}
FORBIDDEN: dict[str, Forbidden] = {}
def _label(cmd: Command) -> str:
    return "tune run" if cmd.tool == "tune" else "torchrun"


def check(cmd: Command, ctx: Context) -> list[Problem]:
    words, problems = torchrun_words(cmd)
    if words is None:
        return problems
    found = scan(words, facts("torchrun"))
    more, _ = split_options(found, ROLES, FORBIDDEN, ctx, _label(cmd))
    problems += more
    if not found.program and not found.missing_value:
        problems.append(problem(f"the command runs {_label(cmd)} without a script", "name the training script"))
    if cmd.tool == "tune" and found.program and "--config" not in found.program[1:]:
        problems.append(problem("`tune run` needs --config after the recipe (torchtune refuses to start without it)",
                                "add --config CONFIG after the recipe name"))
    if ctx.known and found.program:
        problems += parallel.refused(cmd, ctx.topology.degrees)
    return problems


def render(cmd: Command, ctx: Context, rank: Optional[int]) -> Launch:
    topo = ctx.topology
    assert topo is not None
    node = ctx.values(rank)
    words, _ = torchrun_words(cmd)
    assert words is not None
    found = scan(words, facts("torchrun"))
    _, kept = split_options(found, ROLES, FORBIDDEN, ctx, _label(cmd))
    head = ("torchrun",) if cmd.tool == "python" else cmd.head
    argv: list[Word] = [lit(w) for w in head]
    argv += [lit("--nnodes"), node.nnodes, lit("--nproc-per-node"), node.nproc_per_node,
             lit("--node-rank"), node.node_rank]
    if cmd.tool == "tune":
        argv += [lit("--rdzv-endpoint"), node.endpoint]
    else:
        argv += [lit("--master-addr"), node.master_addr, lit("--master-port"), node.master_port]
    if not found.find("--rdzv-conf"):
        argv += [lit("--rdzv-conf"), lit(f"timeout={topo.rdzv_timeout_seconds}")]
    program = parallel.program_with_degrees(cmd, found.program, topo.degrees)
    argv += [lit(w) for w in option_words(kept)] + [lit(w) for w in program]
    return Launch(tool=cmd.tool, argv=tuple(argv))
