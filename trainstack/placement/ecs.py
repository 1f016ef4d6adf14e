"""The ECS strategy: GPU instance types x node counts x pricing (on-demand, spot), and the Plan.

Every catalog instance type in the region (and types seen only in other mainland regions,
labelled "availability unverified") becomes options; the engine sizes, prices and checks each.
The feasible ones with a known price are ranked by the objective.
"""

from __future__ import annotations

from typing import Iterable, Optional

from .. import sizing
from ..sizing import calibration_overlay
from ..catalog import Catalog, load_catalog
from ..layout import plan_image, plan_network, plan_spot_pool, plan_storage
from ..plan import Candidate, EstimateSummary, JobPlan, Plan, Rejection, spot_price_limit
from ..profile import TrainingProfile
from ..reasons import Reason, ReasonCode, reason
from .engine import (
    SPOT_RESTART_ALLOWANCE, Option, Resolution, closest, evaluate, family_rejection, node_counts, ranked,
    static_rejection, unverified_labels, zone_for,
)

ALTERNATIVES_SHOWN = 8
SPOT_OPTIONS = {"never": (False,), "allow": (False, True), "require": (True,)}


def considered(profile: TrainingProfile, catalog: Optional[Catalog] = None) -> Resolution:
    """Every ECS candidate with its verdict, and the families none of whose types can run the job."""
    catalog = catalog or load_catalog()
    spot_options = SPOT_OPTIONS[profile.resources.spot]
    cands: list[Candidate] = []
    by_family: dict[str, list[tuple[str, Reason]]] = {}
    feasible_families: set[str] = set()
    for inst in catalog.resolved_instances():
        why = static_rejection(profile, inst)
        nodes_list: list[int] = []
        if why is None:
            nodes_list, why = node_counts(profile, inst)
        if why is not None:
            by_family.setdefault(inst.family.name, []).append((inst.name, why))
            continue
        unverified = tuple(unverified_labels(inst))
        placements = {spot: zone_for(profile, catalog, inst, spot) for spot in spot_options}
        rows = []
        for nodes in nodes_list:
            for spot in spot_options:
                zone, zlabels, blocked = placements[spot]
                rows.append(evaluate(profile, catalog, Option(inst, nodes, spot, zone, tuple(zlabels) + unverified,
                                                              blocked)))
        cands.extend(rows)
        if any(c.feasible for c in rows):
            feasible_families.add(inst.family.name)
        else:
            near = closest(rows)
            by_family.setdefault(inst.family.name, []).append(
                (inst.name, reason(near.reason_code or ReasonCode.NO_FEASIBLE_LAYOUT, near.reason or "no feasible layout")))
    rejected = [family_rejection(f, rows) for f, rows in sorted(by_family.items()) if f not in feasible_families]
    return Resolution(plan=None, candidates=cands, rejected=rejected)


def resolve_ecs(profile: TrainingProfile, catalog: Catalog, res: Optional[Resolution] = None) -> Resolution:
    """The cheapest (or fastest) feasible ECS plan; ``res.plan`` is None when nothing is feasible."""
    res = res or considered(profile, catalog)
    feasible = ranked(res.candidates, profile.resources.objective)
    if feasible:
        res.plan = build_plan(profile, catalog, feasible[0], feasible[1:ALTERNATIVES_SHOWN + 1], res.rejected)
    return res


def build_plan(profile: TrainingProfile, catalog: Catalog, best: Candidate, alternatives: Iterable[Candidate],
               rejected: Iterable[Rejection]) -> Plan:
    inst = catalog.instance(best.instance_type or "")
    t = profile.training
    gpus = best.nodes * best.gpus_per_node
    mem = calibration_overlay.adjust_memory(profile.architecture, t, best.gpu_model,
                                            sizing.memory_estimate(profile.architecture, t, gpus))
    quote = catalog.quote(profile.region, inst.name)
    limit = spot_price_limit(quote.on_demand_cny_per_hour) if best.spot and quote.on_demand_cny_per_hour else None
    storage = plan_storage(profile, inst, best.nodes, best.spot, mem.trainable_params)
    network = plan_network(profile, inst, best.nodes, best.spot)
    image = plan_image(profile, inst)
    spot_pool, pool_labels = plan_spot_pool(profile, best.nodes, best.spot, limit)
    reasons = [
        f"{best.instance_type}: {best.nodes} x {best.gpus_per_node} {best.gpu_model}, "
        f"{'spot' if best.spot else 'on-demand'}, cheapest feasible by {profile.resources.objective}",
        f"memory: needs {mem.required_gib_per_gpu:.1f} GiB per GPU, margin {best.memory_margin_gib:.1f} GiB",
    ]
    if best.nodes > 1:
        reasons.append(f"{best.nodes} nodes over {network.rdma} in zone {best.zone or '(chosen at deploy)'}")
    labels = list(best.labels)
    if best.zone is None:
        labels.append("zone chosen at deploy time from current stock (not seen in the price snapshot)")
    known_zones = sorted({z for p in catalog.prices.get(profile.region, {}).values() for z in p.zones})
    if profile.zone and known_zones and profile.zone not in known_zones:
        labels.append(f"zone {profile.zone} never appears in the catalog for {profile.region} (seen: "
                      f"{', '.join(known_zones)}): check its name before `pulumi up` (`trainstack preflight`)")
    if best.spot:
        labels.append(f"spot hours include a {SPOT_RESTART_ALLOWANCE - 1:.0%} allowance for interruptions and restarts")
        labels.append(f"spot price limit {limit} CNY/h = the on-demand price (never pay more than on-demand)")
    if t.tokens is None:
        labels.append("training.tokens not set: no hours or total cost; ranked by hourly cost")
    labels.append("costs are GPU instances only: disks, CPFS, OSS, NAT and traffic are billed on top")
    labels += list(storage.notes)
    labels += pool_labels
    return Plan(
        name=profile.name, region=profile.region, zone=best.zone, target="ecs", instance_type=inst.name,
        gpu_model=best.gpu_model, nodes=best.nodes, gpus_per_node=best.gpus_per_node, total_gpus=gpus,
        spot=best.spot, spot_price_limit=limit, spot_strategy="SpotWithPriceLimit" if best.spot else "NoSpot",
        hourly_cost_cny=best.hourly_cost_cny, estimated_hours=best.estimated_hours,
        total_cost_cny=best.total_cost_cny, objective=profile.resources.objective,
        estimate=EstimateSummary(
            gpu_model=best.gpu_model, peak_gib_per_gpu=round(mem.peak_gib_per_gpu, 2),
            required_gib_per_gpu=round(mem.required_gib_per_gpu, 2),
            usable_gib_per_gpu=inst.gpu.usable_gib if inst.gpu else None,
            memory_margin_gib=best.memory_margin_gib, tokens_per_second=best.tokens_per_second,
            tokens_per_second_per_gpu=None if best.tokens_per_second is None else round(best.tokens_per_second / gpus, 1),
            estimated_hours=best.estimated_hours, on_demand_hourly_cny=_times(quote.on_demand_cny_per_hour, best.nodes),
            spot_hourly_cny=_times(quote.spot_cny_per_hour, best.nodes)),
        storage=storage, network=network, image=image, job=job_plan(profile, best.gpus_per_node, gpus),
        spot_pool=spot_pool, tags=dict(profile.tags), labels=tuple(dict.fromkeys(labels)), reasons=tuple(reasons),
        alternatives=tuple(alternatives), rejected=tuple(rejected), catalog_date=catalog.newest_price_date)


def job_plan(profile: TrainingProfile, nproc_per_node: int, total_gpus: int) -> JobPlan:
    """What runs on the nodes (or pods), as the profile states it."""
    t, j = profile.training, profile.job
    return JobPlan(command=j.command, code_uri=j.code_uri, env=dict(j.env),
                   secrets={k: v.model_dump() for k, v in j.secrets.items()}, max_runtime_hours=j.max_runtime_hours,
                   max_total_cost_cny=profile.resources.max_total_cost, deadline_hours=profile.resources.deadline_hours,
                   nproc_per_node=nproc_per_node, method=t.method, precision=t.precision, zero_stage=t.zero_stage,
                   gradient_checkpointing=t.gradient_checkpointing, micro_batch_size=t.micro_batch_size,
                   sequence_length=t.sequence_length, gradient_accumulation_steps=t.accumulation_steps(total_gpus))


def _times(v: Optional[float], n: int) -> Optional[float]:
    return None if v is None else round(v * n, 4)
