"""torchrun, and the commands that become torchrun: ``python script.py`` (one process per
GPU under torchrun, which runs the script with the same interpreter) and ``tune run``
(torchtune copies torchrun's options into its own parser, data/tune.yaml).

torchrun gets the topology as its documented flags (data/torchrun.yaml): ``--nnodes``,
``--nproc-per-node``, ``--node-rank``, ``--master-addr``, ``--master-port`` with the default
static rendezvous, plus ``--rdzv-conf timeout=...`` unless the user gives ``--rdzv-conf``.
``tune run`` forces ``--standalone`` unless it sees ``--rdzv-endpoint``, so it gets
``--rdzv-endpoint node0:port`` instead of the address and port flags.

A multi-node self-healing plan (``Topology.elastic``) runs torchrun elastic instead: ``--nnodes N:N``
(a fixed world size), ``--rdzv-backend c10d --rdzv-endpoint node0:port --rdzv-id NAME``,
``--max-restarts`` (the user's, if given), ``--local-addr`` (the node's own private IP, set at run
time) and ``--rdzv-conf join_timeout=...,is_host=...`` (node 0 hosts the store); no node rank.
"""

from __future__ import annotations

from typing import Optional

from ..errors import Problem
from .base import Command, Context, Launch, problem
from . import parallel
from .managed import Forbidden, option_words, split_options
from .options import facts, scan
from .torchrun_words import torchrun_words
from .words import Ref, Word, lit

ROLES = {"--nnodes": "nnodes", "--nproc-per-node": "nproc", "--node-rank": "node_rank",
         "--master-addr": "master_addr", "--master-port": "master_port", "--rdzv-backend": "rdzv_backend",
         "--rdzv-endpoint": "endpoint", "--standalone": "standalone"}
FORBIDDEN: dict[str, Forbidden] = {}
#: torch 2.13 (git cf30153c) dynamic_rendezvous.py ``next_rendezvous``: with the agents' TCP store shared
#: (the default), an agent that is rank 0 again in a later round keeps its first round's bootstrap
#: info and never publishes that round's master address, while a node joining for the first time
#: waits for it: a replacement node hangs and node 0 fails after 60 s (seen in make test-launch,
#: tests/launch/test_elastic_real.py). The documented opt-out rebuilds it every round.
ELASTIC_ENV = (("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", lit("1")),)
#: torchrun options trainstack sets itself for torchrun elastic (a multi-node self-healing plan)
ELASTIC_OWN = ("--rdzv-id", "--rdzv-conf", "--local-addr")
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
    if ctx.known and ctx.topology.elastic is not None:
        problems += _elastic_problems(cmd, found)
    if ctx.known and found.program:
        problems += parallel.refused(cmd, ctx.topology.degrees)
    return problems


def _elastic_problems(cmd: Command, found) -> list[Problem]:
    """(``tune run`` and the other launchers never get here: check_command refuses them first.)"""
    return [problem(f"torchrun {opt.canonical} is set by trainstack on a self-healing plan (the c10d rendezvous "
                    "on node 0, this node's address, node 0 hosting the store)",
                    f"remove {opt.canonical}", opt.given) for opt in found.options if opt.canonical in ELASTIC_OWN]


def _elastic_words(topo, rank: Optional[int], has_restarts: bool) -> list[Word]:
    e = topo.elastic
    words: list[Word] = [lit("--nnodes"), lit(f"{topo.nnodes}:{topo.nnodes}"), lit("--nproc-per-node"),
                         lit(topo.nproc_per_node), lit("--rdzv-backend"), lit("c10d"), lit("--rdzv-endpoint"),
                         lit(topo.rendezvous_endpoint), lit("--rdzv-id"), lit(e.run_id)]
    if not has_restarts:
        words += [lit("--max-restarts"), lit(e.max_restarts)]
    host = "true" if rank == 0 else "false"
    words += [lit("--local-addr"), (Ref(e.local_addr),), lit("--rdzv-conf"),
              lit(f"join_timeout={e.join_timeout_seconds},is_host={host}")]
    return words


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
    if topo.elastic is not None:
        argv += _elastic_words(topo, rank, has_restarts=bool(found.find("--max-restarts")))
        program = parallel.program_with_degrees(cmd, found.program, topo.degrees)
        argv += [lit(w) for w in option_words(kept)] + [lit(w) for w in program]
        return Launch(tool=cmd.tool, argv=tuple(argv), env=ELASTIC_ENV)
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
