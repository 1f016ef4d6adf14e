"""Why a candidate or a whole family cannot run the job: a code for programs, a sentence for people.

Code that needs to know *why* (the infeasible summary, the DLC strategy, suggestions, tests) reads
``code``; only people read ``message``. No code ever parses a message.
"""

from __future__ import annotations

from enum import Enum
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field


class ReasonCode(str, Enum):
    """Every hard rule of the placement engine, in the order the engine checks them."""

    # per instance type, before sizing (static)
    NOT_TRAINING_HARDWARE = "not-training-hardware"
    GPU_UNVERIFIED = "gpu-unverified"
    NOT_IN_GPU_MODELS = "not-in-gpu-models"
    NOT_IN_INSTANCE_TYPES = "not-in-instance-types"
    NO_BF16 = "no-bf16"
    NO_FP8 = "no-fp8"
    MULTI_GPU_WITHOUT_NVLINK = "multi-gpu-without-nvlink"
    GPU_COUNT_MISMATCH = "gpu-count-mismatch"
    TOO_MANY_NODES = "too-many-nodes"
    MULTI_NODE_WITHOUT_RDMA = "multi-node-without-rdma"
    TENSOR_PARALLEL_ACROSS_NODES = "tensor-parallel-across-nodes"
    TENSOR_PARALLEL_WITHOUT_NVLINK = "tensor-parallel-without-nvlink"
    LAYOUT_WORLD_SIZE = "layout-world-size"
    LAYOUT_NO_LINK = "layout-no-link"
    DLC_PUBLIC_LIMIT = "dlc-public-limit"
    # per candidate (placement, pricing, sizing)
    NO_SPOT_STOCK = "no-spot-stock"
    SPOT_WITHOUT_ON_DEMAND = "spot-without-on-demand-price"
    SPOT_ABOVE_ON_DEMAND = "spot-above-on-demand"
    ZERO_NEEDS_GPUS = "zero-needs-several-gpus"
    MEMORY = "memory"
    DEADLINE = "deadline"
    HOURLY_BUDGET = "hourly-budget"
    TOTAL_BUDGET = "total-budget"
    SPEED_UNKNOWN = "speed-unknown"
    PRICE_UNKNOWN = "price-unknown"
    NO_FEASIBLE_LAYOUT = "no-feasible-layout"


#: Codes that only say "this costs too much" or "its price is unknown": a DLC spec rejected for
#: these alone can still run as a DLC job (DLC bills by its own price list).
PRICE_CODES = frozenset({ReasonCode.HOURLY_BUDGET, ReasonCode.TOTAL_BUDGET, ReasonCode.PRICE_UNKNOWN})
BUDGET_CODES = frozenset({ReasonCode.HOURLY_BUDGET, ReasonCode.TOTAL_BUDGET})


class Reason(BaseModel):
    """One broken rule: what broke (``code``), the user's sentence (``message``) and, where the rule
    rests on a catalog fact, the source tag and the citation that states it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: ReasonCode
    message: str
    source: Optional[str] = Field(None, description="Tag in the catalog's sources.yaml the rule's fact rests on")
    fact: Optional[str] = Field(None, description="The citation quoted: families.<family>.<fact> (families.yaml)")


def reason(code: ReasonCode, message: str, *, source: Optional[str] = None, fact: Optional[str] = None) -> Reason:
    return Reason(code=code, message=message, source=source, fact=fact)


def first_code(reasons: list[Optional[Reason]]) -> Optional[ReasonCode]:
    return next((r.code for r in reasons if r is not None), None)
