"""Tools that read the topology from the environment and start torchrun themselves:
LLaMA-Factory (``llamafactory-cli train``: NNODES, NODE_RANK, NPROC_PER_NODE, MASTER_ADDR,
MASTER_PORT, FORCE_TORCHRUN=1; data/llamafactory.yaml), ms-swift (``swift sft|pt|rlhf``: the
same names, data/swift.yaml), and any other program or script, which runs ONCE per node with
those five variables (what launch scripts that call torchrun themselves expect; ``torchrun
--no-python ./run.sh`` runs a script once per GPU instead).

LLaMA-Factory and ms-swift start torchrun themselves without ``--rdzv-conf``, so its rendezvous
would wait torch's default 900 s for the other nodes. Both pass their whole environment to it
(LLaMA-Factory ``env = deepcopy(os.environ)`` ... ``subprocess.run(..., env=env)``,
src/llamafactory/launcher.py:79,130 at ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30; ms-swift
``subprocess.run(args)`` inheriting it, swift/cli/main.py ``cli_main`` at
3602360a562313afbf2ef6065fdf61f271a2c5b9), and torchrun reads every option it is not given from
``PET_<OPTION>`` (torch/distributed/argparse_util.py ``env``: "Get argument values from PET_{dest}";
``--rdzv-conf`` has dest rdzv_conf), so ``PET_RDZV_CONF=timeout=<plan's>`` gives them the plan's
rendezvous timeout (1,800 s, as trainstack's own torchrun line).
"""

from __future__ import annotations

from typing import Optional

from ..errors import Problem
from .base import Command, Context, Launch, problem
from . import parallel
from .options import data
from .topology import NodeValues
from .words import Word, lit


def topology_env(node: NodeValues) -> list[tuple[str, Word]]:
    return [("NNODES", node.nnodes), ("NODE_RANK", node.node_rank), ("NPROC_PER_NODE", node.nproc_per_node),
            ("MASTER_ADDR", node.master_addr), ("MASTER_PORT", node.master_port)]


def check(cmd: Command, ctx: Context) -> list[Problem]:
    problems: list[Problem] = []
    if cmd.tool == "llamafactory":
        if cmd.head[-1] != "train":
            problems.append(problem(f"`{cmd.head[0]} {cmd.head[-1]}` is not a training run",
                                    f"use `{cmd.head[0]} train CONFIG.yaml`", cmd.head[-1]))
        if data("llamafactory")["splits_arguments_on_whitespace"] and any(
                any(c.isspace() for c in a) for a in cmd.args):
            problems.append(problem(
                "an argument of llamafactory-cli train contains whitespace, and LLaMA-Factory rebuilds its torchrun "
                "command by splitting on whitespace, so it would reach the trainer as several arguments",
                "put the value in the YAML config file instead"))
        if not cmd.args:
            problems.append(problem("llamafactory-cli train needs a config file", "add CONFIG.yaml"))
    if cmd.tool == "swift":
        allowed = data("swift")["subcommands"]
        if cmd.head[-1] not in allowed:
            problems.append(problem(f"`swift {cmd.head[-1]}` is not a training run trainstack launches",
                                    f"use one of: {', '.join('swift ' + s for s in allowed)}", cmd.head[-1]))
    if cmd.tool == "script" and ctx.known and ctx.topology.nnodes > 1:
        name = cmd.head[-1].rsplit("/", 1)[-1]
        if name in data("torchtitan")["single_node_scripts"] or any(
                a.rsplit("/", 1)[-1] in data("torchtitan")["single_node_scripts"] for a in cmd.args[:1]):
            problems.append(problem(
                "torchtitan's run_train.sh starts a single-node rendezvous (--rdzv_endpoint=localhost:0), so it "
                f"cannot span the plan's {ctx.topology.nnodes} nodes",
                "run `torchrun -m torchtitan.train --job.config_file CONFIG.toml`; trainstack adds the topology"))
    if ctx.known:
        problems += parallel.refused(cmd, ctx.topology.degrees)
    return problems


def render(cmd: Command, ctx: Context, rank: Optional[int]) -> Launch:
    node = ctx.values(rank)
    env = topology_env(node)
    if cmd.tool == "llamafactory":
        env.insert(0, ("FORCE_TORCHRUN", lit(1)))  # also with one GPU per node: always one launch path
    if cmd.tool in ("llamafactory", "swift"):
        env.append(("PET_RDZV_CONF", lit(f"timeout={ctx.topology.rdzv_timeout_seconds}")))
    argv = tuple(lit(w) for w in cmd.head + cmd.args)
    return Launch(tool=cmd.tool, argv=argv, env=tuple(env))
