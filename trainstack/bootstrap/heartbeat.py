"""Where a node's heartbeat goes (docs/status.md), and the plan facts the node programs need.

Every ECS plan has the stack bucket (``plan.storage.oss``): node ``N`` writes
``<status_prefix><N>/heartbeat.json``. The heartbeat program itself is one of the node programs
(:mod:`trainstack.bootstrap.programs`). Pure: the same plan gives the same keys.
"""

from __future__ import annotations

from typing import Optional

from trainstack.plan import Plan


def nproc_per_node(plan: Plan) -> int:
    """Ranks per node: the resolver sets it; a hand-built JobPlan that leaves the default means one per GPU."""
    return plan.job.nproc_per_node if "nproc_per_node" in plan.job.model_fields_set else plan.gpus_per_node


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
