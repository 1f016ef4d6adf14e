"""What a calibration changed in a plan: the plan with and without the overlay, side by side.

A calibration can move a plan to another GPU type, node count or cost (after one heartbeat said the
A10 is slow, a plan moved to an A100-40G type not seen offered in the region), and a label deep in
the "rests on" list does not tell a reviewer why. When an overlay entry applies to the profile's
workload (its model, framework, method and precision, on any GPU), the same profile is resolved
again with the overlay suspended (trainstack.calibration_overlay.suspended); if the chosen placement,
hours or cost differ, :class:`CalibrationEffect` says so, and ``resolve`` and ``plan`` print it in
their first lines (JSON: ``calibration`` with ``before``/``after``; absent when no calibration
applies, so plans without one are byte-identical).
"""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel, ConfigDict

from . import calibration_overlay as cal
from .errors import TrainstackError
from .plan import Plan
from .profile import TrainingProfile

#: the plan fields a calibration can move (a change in any of them is reported)
FIELDS = ("target", "instance_type", "gpu_model", "nodes", "gpus_per_node", "spot", "tokens_per_second",
          "estimated_hours", "hourly_cost_cny", "total_cost_cny")


class PlanPoint(BaseModel):
    """Where and how fast a plan runs, and what it costs."""

    model_config = ConfigDict(frozen=True)

    target: str
    instance_type: Optional[str]
    gpu_model: Optional[str]
    nodes: int
    gpus_per_node: int
    spot: bool
    tokens_per_second: Optional[float]
    estimated_hours: Optional[float]
    hourly_cost_cny: Optional[float]
    total_cost_cny: Optional[float]
    type_seen_in_region: Optional[bool] = None

    @classmethod
    def of(cls, plan: Plan) -> "PlanPoint":
        return cls(target=plan.target, instance_type=plan.instance_type, gpu_model=plan.gpu_model, nodes=plan.nodes,
                   gpus_per_node=plan.gpus_per_node, spot=plan.spot, tokens_per_second=plan.estimate.tokens_per_second,
                   estimated_hours=plan.estimated_hours, hourly_cost_cny=plan.hourly_cost_cny,
                   total_cost_cny=plan.total_cost_cny,
                   type_seen_in_region=plan.prices.type_seen_in_region if plan.prices else None)

    def text(self, region: str) -> str:
        what = self.instance_type or "a resource quota"
        money = lambda v: "unknown" if v is None else f"{v:,.2f}"  # noqa: E731
        seen = f"; {what} not seen offered in {region}" if self.type_seen_in_region is False else ""
        return (f"{self.nodes} x {what} ({self.gpus_per_node} x {self.gpu_model or 'GPU'}, "
                f"{'spot' if self.spot else 'on-demand'}), {money(self.estimated_hours)} h, "
                f"{money(self.hourly_cost_cny)} CNY/h, {money(self.total_cost_cny)} CNY total{seen}")


class CalibrationEffect(BaseModel):
    """The plan with the calibration (``after``) and without it (``before``; None: nothing fits then)."""

    model_config = ConfigDict(frozen=True)

    overlay: str
    entries: tuple[str, ...]
    before: Optional[PlanPoint]
    after: PlanPoint
    changed: tuple[str, ...]

    def lines(self, region: str) -> list[str]:
        head = (f"calibration changes this plan ({', '.join(self.changed)}), from the calibration overlay "
                f"{self.overlay}:")
        out = [head] + [f"  - {e}" for e in self.entries]
        out.append("  without it: " + (self.before.text(region) if self.before else "nothing fits the profile"))
        out.append("  with it:    " + self.after.text(region))
        return out


def _entry_text(e: cal.OverlayEntry) -> str:
    mem = f", memory x{e.applied_memory_factor:.3f}" if e.applied_memory_factor > 1 else ""
    return (f"{e.key.gpu} speed x{e.throughput_factor:.3f}{mem}, measured by {e.source.stack} {e.source.node} "
            f"at {e.source.heartbeat_at} on {e.setup.nodes} x {e.setup.instance_type or e.key.gpu}")


def workload_entries(profile: TrainingProfile) -> tuple[cal.OverlayEntry, ...]:
    """The overlay entries of the profile's workload on any GPU."""
    overlay = cal.load_overlay()
    if not overlay.entries:
        return ()
    key = cal.workload_key(profile.architecture, profile.training, "")
    return tuple(e for e in overlay.entries if e.key.model_copy(update={"gpu": ""}) == key)


def effect(profile: TrainingProfile, plan: Plan, catalog=None) -> Optional[CalibrationEffect]:
    """What the overlay changed in ``plan`` (None: no entry applies, or the plan is the same without it)."""
    entries = workload_entries(profile)
    if not entries:
        return None
    from .placement import resolve

    try:
        with cal.suspended():
            before: Optional[PlanPoint] = PlanPoint.of(resolve(profile, catalog))
    except TrainstackError:
        before = None
    after = PlanPoint.of(plan)
    changed = ("feasibility",) if before is None else tuple(f for f in FIELDS if getattr(before, f) != getattr(after, f))
    if not changed:
        return None
    return CalibrationEffect(overlay=str(cal.overlay_path()), entries=tuple(_entry_text(e) for e in entries),
                             before=before, after=after, changed=changed)
