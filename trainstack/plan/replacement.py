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
    stage: Literal["setup", "resume"] = Field(
        "setup", description="setup: from the reclaim notice on, overlapping the notice window (ESS launches the "
                             "replacement on the reclaim message); resume: after the release and the setup")
    before_launch: bool = Field(False, description="Before the replacement instance exists (it bills from its launch)")


class ReplacementEstimate(_Frozen):
    """A preemption of one pool node, priced: the survivors wait (and bill) until the replacement trains."""

    phases: tuple[ReplacementPhase, ...]
    notice_seconds: float = Field(description="The reclaim notice window: the reclaimed node trains through it while "
                                              "its replacement sets up")
    seconds: float = Field(description="The survivors' wait: the reclaimed node's release to training again, this plan")
    cold_seconds: float = Field(description="The same with no prepared image (driver, eRDMA, PyTorch installed at boot)")
    prepared_seconds: float = Field(description="The same with an image that holds every part it can")
    join_wait_seconds: float = Field(description="The release to the replacement's agent joining the rendezvous (what "
                                                 "torchrun's join_timeout bounds)")
    replacement_billed_seconds: float = Field(description="The replacement's launch to training: it bills, not trains")
    survivors: int = Field(ge=0, description="Nodes that wait meanwhile (node 0 and the other pool nodes)")
    survivors_hourly_cny: Optional[float] = Field(None, description="What the waiting nodes bill per hour")
    replacement_hourly_cny: Optional[float] = Field(None, description="The replacement's own price per hour (spot)")
    cost_cny: Optional[float] = Field(None, description="Per preemption: the survivors' wait plus the replacement's "
                                                        "billed setup, this plan")
    cold_cost_cny: Optional[float] = Field(None, description="The same with no prepared image")
    allowance_preemptions: Optional[float] = Field(
        None, description="Preemptions the plan's spot restart allowance pays for, at this plan's replacement time")
    join_timeout_seconds: Optional[int] = Field(None, description="How long the agents wait for a replacement")
    dataset_copy_seconds: Optional[float] = Field(
        None, description="storage.dataset_sync at-boot: the replacement's copy of the dataset, from its boot on, in "
                          "the background (not in seconds: the trainer reads storage.dataset_uri until it completes)")
    restore_from_oss: bool = Field(False, description="The checkpoint restore reads OSS (over the node's network, "
                                                      "which a dataset copy shares)")
    not_counted: str = ("the work since the latest complete checkpoint (your trainer's checkpoint interval; trainstack "
                        "signals a checkpoint on the 5-minute notice), whatever your trainer caches on the dataset disk "
                        "(a replacement's starts empty) and the on-demand fallback's higher price while spot stock is "
                        "gone")
