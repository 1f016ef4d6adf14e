"""The one Plan assembler: a strategy's chosen candidate in, the Plan (or every problem) out.

Like awsx's ``getSubnetSpecs`` + ``validateAndNormalizeSubnetInputs``: pure, and it collects every
problem instead of stopping at the first. The strategies (``ecs.py``, ``dlc.py``) only enumerate,
size and rank candidates; what surrounds the winner is decided here once, for both targets: the
parallel layout (the engine's layout search of the candidate, :func:`candidate_layout`), the
memory estimate, the job, pricing (hourly, total, spot bid, provenance), storage, network and RDMA,
image and labels. The target-specific parts are in ``assemble_ecs.py`` and ``assemble_dlc.py``, what
they share (the choice, the problem collector, the layout) in ``assembly.py``.
"""

from __future__ import annotations

from .. import calibration_overlay, sizing
from ..catalog import Catalog
from ..plan import EstimateSummary, Plan
from ..profile import TrainingProfile
from .assemble_dlc import dlc_parts
from .assemble_ecs import ecs_parts
from .assembly import Assembly, Choice, Collector, candidate_layout, job_plan, parallelism_plan
from .engine import hourly_price
from .prices import provenance

__all__ = ["Assembly", "Choice", "assemble"]


def assemble(profile: TrainingProfile, catalog: Catalog, choice: Choice) -> Assembly:
    """The Plan for ``choice`` (the target's parts from ``assemble_ecs`` / ``assemble_dlc``)."""
    best, t = choice.best, profile.training
    gpus = best.nodes * best.gpus_per_node
    pick = candidate_layout(profile, choice.inst, best)
    mem = calibration_overlay.adjust_memory(profile.architecture, t, best.gpu_model, pick.memory)
    collect = Collector()
    parts = (ecs_parts if choice.target == "ecs" else dlc_parts)(profile, catalog, choice, pick, mem, collect)
    if collect.failed or parts is None:
        return Assembly(None, collect.error())
    gpu = parts.pop("gpu")
    spot = parts["spot"]
    quote = choice.quote
    if best.fit == "at_risk":  # issue 32: chosen only because nothing fits with the interval: say so, with figures
        least = sizing.min_margin_gib(gpu.usable_gib, profile.resources.memory_margin_percent / 100)
        parts["labels"] = (sizing.at_risk_label(mem, gpu.usable_gib, least, gpu.name), *parts["labels"])
    estimate = EstimateSummary(
        gpu_model=gpu.name, peak_gib_per_gpu=round(mem.peak_gib_per_gpu, 2),
        required_gib_per_gpu=round(mem.required_gib_per_gpu, 2), usable_gib_per_gpu=gpu.usable_gib,
        memory_margin_gib=best.memory_margin_gib, tokens_per_second=best.tokens_per_second,
        tokens_per_second_per_gpu=None if best.tokens_per_second is None else round(best.tokens_per_second / gpus, 1),
        estimated_hours=best.estimated_hours,
        on_demand_hourly_cny=hourly_price(quote, best.gpus_per_node, best.nodes, False),
        spot_hourly_cny=None if quote.spot_cny_per_hour is None else round(quote.spot_cny_per_hour * best.nodes, 4),
        **sizing.summary_intervals(mem, pick.throughput, best.tokens_per_second and best.tokens_per_second / gpus,
                                   best.fit))
    plan = collect.run(lambda: Plan(
        name=profile.name, region=profile.region, target=choice.target, gpu_model=gpu.name, nodes=best.nodes,
        gpus_per_node=best.gpus_per_node, total_gpus=gpus, spot_strategy="SpotWithPriceLimit" if spot else "NoSpot",
        estimated_hours=best.estimated_hours, objective=profile.resources.objective, estimate=estimate,
        job=job_plan(profile, best.gpus_per_node, gpus, pick.layout), parallelism=parallelism_plan(profile, pick),
        tags=dict(profile.tags), alternatives=tuple(choice.alternatives), rejected=tuple(choice.rejected),
        catalog_date=catalog.newest_price_date,
        prices=provenance(catalog, quote, zone=parts["zone"], spot=spot).model_copy(
            update={"on_demand_cny_per_hour": quote.on_demand_cny_per_hour}),
        policy_exceptions=choice.exceptions, **parts), "plan")
    return Assembly(plan, collect.error())
