"""``accelerate launch``: Hugging Face Accelerate takes the topology as flags
(data/accelerate.yaml): ``--num_machines``, ``--num_processes`` (the TOTAL over all machines;
it gives torchrun ``num_processes // num_machines`` per node), ``--machine_rank``,
``--main_process_ip``, ``--main_process_port``. It launches through torch's elastic agent
(``--multi_gpu``), which trainstack adds when the command names no mode and no config file
(Accelerate would otherwise start one process on a one-GPU node). With DeepSpeed on several
nodes its default multi-node launcher is pdsh over SSH, which trainstack nodes do not have, so
``--deepspeed_multinode_launcher standard`` (torchrun on every node) is passed; the SSH/MPI
launchers are refused.
"""

from __future__ import annotations

from typing import Optional

from ..errors import Problem
from .base import Command, Context, Launch
from . import parallel
from .managed import Forbidden, check_script_launcher, option_words, split_options
from .options import facts, scan
from .words import Word, lit

ROLES = {"--num_machines": "nnodes", "--num_processes": "world", "--machine_rank": "node_rank",
         "--main_process_ip": "master_addr", "--main_process_port": "master_port", "--rdzv_backend": "rdzv_backend"}
_NO_SSH = "remove it; trainstack runs Accelerate on every node itself (standard: torchrun per node)"
FORBIDDEN = {
    "--deepspeed_multinode_launcher": Forbidden(
        "needs SSH or MPI between the nodes, which trainstack nodes do not have", _NO_SSH,
        unless=lambda o: o.value == "standard"),
    "--deepspeed_hostfile": Forbidden("is read only by the SSH launchers (pdsh, MPI)", _NO_SSH),
    "--mpirun_hostfile": Forbidden("is for an MPI launch across SSH", _NO_SSH),
    "--tpu": Forbidden("launches on TPUs; trainstack nodes have GPUs", "remove it"),
    "--tpu_cluster": Forbidden("launches on a TPU pod; trainstack nodes have GPUs", "remove it"),
}
MODES = ("--multi_gpu", "--use_deepspeed", "--use_fsdp", "--use_megatron_lm", "--cpu", "--tpu")


def check(cmd: Command, ctx: Context) -> list[Problem]:
    return check_script_launcher(cmd, ctx, "accelerate", "accelerate launch", ROLES, FORBIDDEN)


def render(cmd: Command, ctx: Context, rank: Optional[int]) -> Launch:
    topo = ctx.topology
    assert topo is not None
    node = ctx.values(rank)
    found = scan(cmd.args, facts("accelerate"))
    _, kept = split_options(found, ROLES, FORBIDDEN, ctx, "accelerate launch")
    argv: list[Word] = [lit(w) for w in cmd.head]
    argv += [lit("--num_machines"), node.nnodes, lit("--num_processes"), lit(topo.world_size),
             lit("--machine_rank"), node.node_rank, lit("--main_process_ip"), node.master_addr,
             lit("--main_process_port"), node.master_port]
    if not found.find(*MODES) and not found.find("--config_file") and topo.world_size > 1:
        argv.append(lit("--multi_gpu"))
    if topo.nnodes > 1 and not found.find("--deepspeed_multinode_launcher"):
        argv += [lit("--deepspeed_multinode_launcher"), lit("standard")]  # read only with DeepSpeed
    if not found.find("--rdzv_conf"):
        argv += [lit("--rdzv_conf"), lit(f"timeout={topo.rdzv_timeout_seconds}")]
    # never --gradient_accumulation_steps: it becomes ACCELERATE_GRADIENT_ACCUMULATION_STEPS, which wins over
    # the Accelerator(gradient_accumulation_steps=...) of the script (launchers/intent.py, data/intent.yaml)
    kept, degree_words = parallel.accelerate_options(found, kept, topo.degrees)
    argv += [lit(w) for w in degree_words]
    argv += [lit(w) for w in option_words(kept)] + [lit(w) for w in found.program]
    return Launch(tool="accelerate", argv=tuple(argv))
