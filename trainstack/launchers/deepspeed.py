"""The ``deepspeed`` launcher without SSH: trainstack nodes have no SSH between them, so each
node runs DeepSpeed's runner itself with ``--no_ssh --node_rank R --master_addr A
--master_port P`` (``--no_ssh`` exists since DeepSpeed 0.14.5: deepspeedai/DeepSpeed PR #5728,
commit acbaca3223adc38cbacd977b887be6baf34a197f, first tagged v0.14.5; Accelerate's own
launcher states the same minimum). The runner still needs a hostfile (``HOST slots=N`` per
node, in rank order) to know the world: without one it falls back to the local GPUs and
resets the master address to 127.0.0.1. With ``--no_ssh`` the host names are not contacted,
only counted, so on PAI-DLC the pods' file lists placeholder names.
"""

from __future__ import annotations

from typing import Optional

from ..errors import Problem
from .base import Command, Context, Launch
from .managed import Forbidden, check_script_launcher, option_words, split_options
from .options import facts, scan
from .words import Word, lit

ROLES = {"--num_nodes": "nnodes", "--num_gpus": "nproc", "--node_rank": "node_rank",
         "--master_addr": "master_addr", "--master_port": "master_port"}
FORBIDDEN = {
    "--hostfile": Forbidden("names other hosts; trainstack writes the hostfile of the plan's nodes",
                            "remove it"),
    "--include": Forbidden("cannot be combined with the --num_gpus trainstack passes (DeepSpeed refuses both)",
                           "remove it; every GPU of each node is used"),
    "--exclude": Forbidden("cannot be combined with the --num_gpus trainstack passes (DeepSpeed refuses both)",
                           "remove it; every GPU of each node is used"),
    "--autotuning": Forbidden("runs experiments over SSH from one node", "run autotuning outside trainstack"),
}
DROPPED = ("--no_ssh",)  # trainstack passes it itself


def check(cmd: Command, ctx: Context) -> list[Problem]:
    return check_script_launcher(cmd, ctx, "deepspeed", "deepspeed", ROLES, FORBIDDEN)


def hostfile_text(hosts: tuple[str, ...], slots: int) -> str:
    return "".join(f"{h} slots={slots}\n" for h in hosts)


def render(cmd: Command, ctx: Context, rank: Optional[int], hostfile_path: str) -> Launch:
    topo = ctx.topology
    assert topo is not None
    node = ctx.values(rank)
    found = scan(cmd.args, facts("deepspeed"))
    _, kept = split_options(found, ROLES, FORBIDDEN, ctx, "deepspeed")
    kept = [o for o in kept if o.canonical not in DROPPED]
    argv: list[Word] = [lit(w) for w in cmd.head]
    argv += [lit("--hostfile"), lit(hostfile_path), lit("--no_ssh"), lit("--node_rank"), node.node_rank,
             lit("--master_addr"), node.master_addr, lit("--master_port"), node.master_port,
             lit("--num_nodes"), node.nnodes, lit("--num_gpus"), node.nproc_per_node]
    argv += [lit(w) for w in option_words(kept)] + [lit(w) for w in found.program]
    hosts = topo.hosts if topo.hosts else tuple(f"node-{i}" for i in range(topo.nnodes))
    return Launch(tool="deepspeed", argv=tuple(argv), hostfile=hostfile_text(hosts, topo.nproc_per_node))
