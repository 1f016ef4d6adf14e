"""What a plan costs, resource by resource: the breakdown every output prints (``Plan.cost``).

Built by the one cost model (``trainstack.placement.cost.cost_breakdown``) over what the plan creates;
these records only say what each figure counts (docs/cost.md, "Which field counts what").
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from .base import _Frozen

#: What a line prices: the GPU nodes (or the DLC job), block storage, file storage, object storage, network.
CostKind = Literal["compute", "block_storage", "file_storage", "object_storage", "network"]
#: Why a line has no price (typed; ``unpriced`` holds the user's sentence).
UnpricedCode = Literal["no-public-price", "no-price-book-entry", "no-dlc-price"]


class CostItem(_Frozen):
    """One billed resource (or a group of identical ones: ``count``) of the plan."""

    name: str = Field(description="What it is, as a reviewer reads it (e.g. 'dataset disks')")
    type: str = Field(description="The Pulumi resource type that is billed")
    kind: CostKind
    count: int = Field(1, ge=0, description="How many resources the line holds")
    quantity: Optional[float] = Field(None, description="Billed size of each: GiB for storage")
    unit: Literal["node", "pod", "GPU", "GiB", "resource"] = "resource"
    pricing: Optional[Literal["on-demand", "spot"]] = Field(None, description="Compute lines only")
    hourly_cny: Optional[float] = Field(None, description="All of the line per hour; None: unpriced")
    run_cny: Optional[float] = Field(None, description="hourly_cny x the run's hours; None: unpriced or no hours")
    monthly_cny: Optional[float] = Field(None, description="A month of the line as planned (hourly x the service's "
                                                            "billing hours per month)")
    after_destroy_monthly_cny: Optional[float] = Field(
        None, description="What it still bills per month after `pulumi destroy` (retained); 0: deleted with the stack")
    retained: bool = Field(False, description="Kept by `pulumi destroy` (storage.retain_on_destroy)")
    price_source: str = Field(description="Whose figure it is, and its date")
    unpriced: Optional[str] = Field(None, description="Why no price is known, and how to set one")
    unpriced_code: Optional[UnpricedCode] = None
    note: Optional[str] = Field(None, description="What is billed on top and not counted (traffic, versions)")
    contingent: bool = Field(False, description="Billed only if something happens (the pool's on-demand fallback "
                                                "while spot stock is gone): priced per hour, never in the totals")


class CostBreakdown(_Frozen):
    """Every billed resource of the plan and the totals budgets and ranking use (all-in)."""

    items: tuple[CostItem, ...] = ()
    hours: Optional[float] = Field(None, description="The run's hours (spot: with the restart allowance)")
    hourly_cny: Optional[float] = Field(None, description="All-in per hour: every priced line; None when the "
                                                          "compute price is unknown")
    total_cny: Optional[float] = Field(None, description="All-in for the run: hourly_cny x hours")
    compute_hourly_cny: Optional[float] = Field(None, description="The GPU nodes (or DLC job) only, per hour")
    compute_total_cny: Optional[float] = Field(None, description="The GPU nodes (or DLC job) only, for the run")
    monthly_cny: Optional[float] = Field(None, description="A month of everything as planned")
    after_destroy_monthly_cny: Optional[float] = Field(
        None, description="Per month after `pulumi destroy`: the retained lines; None when one of them is unpriced")
    complete: bool = Field(True, description="Every line is priced (else the totals leave the unpriced ones out)")
    unpriced: tuple[str, ...] = Field((), description="Names of the lines without a price")

    @property
    def other_hourly_cny(self) -> float:
        """The priced lines that are not compute, per hour (storage and network)."""
        return round(sum(i.hourly_cny or 0.0 for i in self.items if i.kind != "compute" and not i.contingent), 4)
