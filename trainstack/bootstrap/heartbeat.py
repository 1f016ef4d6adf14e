"""Where a node's heartbeat goes and the program that writes it (docs/status.md).

Every ECS plan has the stack bucket (``plan.storage.oss``): node ``N`` writes
``<status_prefix><N>/heartbeat.json``. The heartbeat program (templates/trainstack_heartbeat.py)
does not travel in the user data, which ECS caps at 32 KB: the stack writes it to
:data:`PROGRAM_KEY` in the bucket (components/storage.py) and each node downloads it and checks
it against the sha256 in its node.env before running it. The NCCL check (templates/nccl_check.py),
run at each job start of a multi-GPU plan, travels the same way (:data:`NCCL_CHECK_KEY`). Pure: the
same plan gives the same keys.
"""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path
from typing import Optional

from trainstack.plan import Plan

from .compact import compact

TEMPLATES = Path(__file__).with_name("templates")

PROGRAM = "trainstack_heartbeat.py"
#: Read-only for the nodes (the job/ prefix of the stack bucket), never under the status prefix
#: they write, so a node cannot change the program the other nodes run.
PROGRAM_KEY = f"job/{PROGRAM}"
NCCL_CHECK = "nccl_check.py"
NCCL_CHECK_KEY = f"job/{NCCL_CHECK}"


@functools.lru_cache(maxsize=4)
def program_text(name: str = PROGRAM) -> str:
    """A node program (the heartbeat's by default) as the nodes run it (comments and docstrings
    stripped, like the scripts in the user data)."""
    return compact(name, (TEMPLATES / name).read_text(encoding="utf-8"))


def program_sha256(name: str = PROGRAM) -> str:
    return hashlib.sha256(program_text(name).encode("utf-8")).hexdigest()


def nproc_per_node(plan: Plan) -> int:
    """Ranks per node: the resolver sets it; a hand-built JobPlan that leaves the default means one per GPU."""
    return plan.job.nproc_per_node if "nproc_per_node" in plan.job.model_fields_set else plan.gpus_per_node


def needs_nccl_check(plan: Plan) -> bool:
    """More than one GPU in the job: the launcher checks the fabric with one all-reduce first."""
    return plan.target == "ecs" and plan.nodes * nproc_per_node(plan) > 1


def has_status(plan: Plan) -> bool:
    return plan.target == "ecs" and plan.storage.oss is not None


def status_prefix(plan: Plan, node_name: Optional[str] = None) -> str:
    """``status/`` or one node's ``status/<node name>/`` (a key prefix in the stack bucket)."""
    assert plan.storage.oss is not None
    base = plan.storage.oss.status_prefix.strip("/") + "/"
    return base + (f"{node_name}/" if node_name else "")


def status_uri(plan: Plan, node_name: str) -> str:
    assert plan.storage.oss is not None
    return f"oss://{plan.storage.oss.bucket}/{status_prefix(plan, node_name)}"


def program_uri(plan: Plan, key: str = PROGRAM_KEY) -> str:
    assert plan.storage.oss is not None
    return f"oss://{plan.storage.oss.bucket}/{key}"
