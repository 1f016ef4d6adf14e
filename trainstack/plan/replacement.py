"""What one preemption costs a self-healing plan: the replacement's phases and the survivors' wait
(``SpotPoolPlan.replacement``; computed by trainstack.layout.replacement)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from .base import _Frozen

PhaseKind = Literal["measured", "sourced", "assumed"]


class ReplacementPhase(_Frozen):
    """One step between a reclaimed node's release and the cluster training again."""

    name: str
    what: str
    seconds: float = Field(ge=0, description="Time it takes on this plan (0 when skipped)")
    cold_seconds: float = Field(ge=0, description="Time it takes with no prepared image")
    kind: PhaseKind = Field(description="measured (a test here), sourced (a cited document) or assumed (ours)")
    source: str = Field(description="The test, the sources.yaml tag, or what the assumption rests on")
    skipped: Optional[str] = Field(None, description="Why it takes no time here (the image provides it)")
    bills_replacement: bool = Field(True, description="The replacement instance exists (and bills) during it")


class ReplacementEstimate(_Frozen):
    """A preemption of one pool node, priced: the survivors wait (and bill) until the replacement trains."""

    phases: tuple[ReplacementPhase, ...]
    seconds: float = Field(description="Release to training again, this plan (its image)")
    cold_seconds: float = Field(description="The same with no prepared image (driver, eRDMA, PyTorch installed at boot)")
    survivors: int = Field(ge=0, description="Nodes that wait meanwhile (node 0 and the other pool nodes)")
    survivors_hourly_cny: Optional[float] = Field(None, description="What the waiting nodes bill per hour")
    replacement_hourly_cny: Optional[float] = Field(None, description="The replacement's own price per hour (spot)")
    cost_cny: Optional[float] = Field(None, description="Per preemption: the survivors' wait plus the replacement's "
                                                        "billed setup, this plan")
    cold_cost_cny: Optional[float] = Field(None, description="The same with no prepared image")
    allowance_preemptions: Optional[float] = Field(
        None, description="Preemptions the plan's spot restart allowance pays for, at this plan's replacement time")
    join_timeout_seconds: Optional[int] = Field(None, description="How long the agents wait for a replacement")
    not_counted: str = ("the work since the latest complete checkpoint (your trainer's checkpoint interval; trainstack "
                        "signals a checkpoint on the 5-minute notice) and the on-demand fallback's higher price while "
                        "spot stock is gone")
