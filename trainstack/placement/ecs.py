"""The ECS strategy: GPU instance types x node counts x pricing (on-demand, spot), and the Plan.

Every catalog instance type in the region (and types seen only in other mainland regions,
labelled "availability unverified") becomes options; the engine sizes, prices and checks each.
The feasible ones with a known price are ranked by the objective.
"""

from __future__ import annotations

from typing import Iterable, Optional

from .. import sizing
from .. import calibration_overlay
from ..catalog import Catalog, load_catalog
from ..layout import plan_image, plan_network, plan_spot_pool, plan_storage
from ..layout.network import pool_tcp_note
from ..plan import Candidate, EstimateSummary, JobPlan, ParallelismPlan, Plan, Rejection, spot_price_limit
from ..sizing.parallel import Layout, bubble_fraction, layout_for, micro_batches
from ..profile import TrainingProfile
from ..reasons import Reason, ReasonCode, reason
from .prices import provenance
from .engine import (
    SPOT_RESTART_ALLOWANCE, LayoutPick, Option, Resolution, choose_layout, closest, evaluate, family_rejection,
    anchor_nodes, layout_options, node_counts, node_network, plan_layout, ranked, size, static_rejection,
    unverified_labels, zone_for,
)

ALTERNATIVES_SHOWN = 8
SPOT_OPTIONS = {"never": (False,), "allow": (False, True), "require": (True,)}


def considered(profile: TrainingProfile, catalog: Optional[Catalog] = None) -> Resolution:
    """Every ECS candidate with its verdict, and the families none of whose types can run the job."""
    catalog = catalog or load_catalog()
    arch = profile.architecture
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
        quote = catalog.quote(profile.region, inst.name)
        rows = []
        for nodes in nodes_list:
            sized = size(profile, inst, nodes, arch)
            for spot in spot_options:
                zone, zlabels, blocked = placements[spot]
                rows.append(evaluate(profile, catalog, Option(inst, nodes, spot, zone, tuple(zlabels) + unverified,
                                                              blocked, quote=quote), sized))
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
    pick = candidate_layout(profile, inst, best)
    mem = calibration_overlay.adjust_memory(profile.architecture, t, best.gpu_model, pick.memory)
    quote = catalog.quote(profile.region, inst.name)
    stated = profile.resources.spot_price_limit
    limit = None
    if best.spot:
        limit = spot_price_limit(stated) if stated else (
            spot_price_limit(quote.on_demand_cny_per_hour) if quote.on_demand_cny_per_hour else None)
    storage = plan_storage(profile, inst, best.nodes, best.spot, mem.trainable_params)
    network = plan_network(profile, inst, best.nodes, best.spot, services=storage.cpfs is not None)
    image = plan_image(profile, inst)
    spot_pool, pool_labels = plan_spot_pool(profile, best.nodes, best.spot, limit)
    reasons = [
        f"{best.instance_type}: {best.nodes} x {best.gpus_per_node} {best.gpu_model}, "
        f"{'spot' if best.spot else 'on-demand'}, cheapest feasible by {profile.resources.objective}",
        f"memory: needs {mem.required_gib_per_gpu:.1f} GiB per GPU, margin {best.memory_margin_gib:.1f} GiB",
    ]
    if best.nodes > 1:
        reasons.append(f"{best.nodes} nodes over {network.rdma} in zone {best.zone or '(chosen at deploy)'}")
    reasons += layout_reasons(profile, pick, f"{best.nodes} x {best.gpus_per_node} {best.gpu_model}")
    labels = list(best.labels)
    if best.zone is None:
        labels.append("zone chosen at deploy time from current stock (not seen in the price snapshot)")
    known_zones = sorted({z for p in catalog.prices.get(profile.region, {}).values() for z in p.zones})
    if profile.zone and known_zones and profile.zone not in known_zones:
        labels.append(f"zone {profile.zone} never appears in the catalog for {profile.region} (seen: "
                      f"{', '.join(known_zones)}): check its name before `pulumi up` (`trainstack preflight`)")
    if best.spot:
        labels.append(f"spot hours include a {SPOT_RESTART_ALLOWANCE - 1:.0%} allowance for interruptions and restarts")
        labels.append(f"spot price limit {limit} CNY/h, stated by the profile (resources.spot_price_limit)" if stated
                      else f"spot price limit {limit} CNY/h = the on-demand price (never pay more than on-demand; "
                           "kept after creation, so a catalog refresh never replaces running spot nodes)")
    if t.tokens is None:
        labels.append("training.tokens not set: no hours or total cost; ranked by hourly cost")
    labels.append("costs are GPU instances only: disks, CPFS, OSS, NAT and traffic are billed on top")
    labels += list(storage.notes)
    labels += pool_labels
    if tcp_note := pool_tcp_note(profile, inst, best.nodes, best.spot):
        labels.append(tcp_note)
    return Plan(
        name=profile.name, region=profile.region, zone=best.zone, target="ecs", instance_type=inst.name,
        gpu_model=best.gpu_model, nodes=best.nodes, gpus_per_node=best.gpus_per_node, total_gpus=gpus,
        spot=best.spot, spot_price_limit=limit, spot_strategy="SpotWithPriceLimit" if best.spot else "NoSpot",
        spot_price_limit_source=(("profile" if stated else "on-demand price") if limit is not None else None),
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
        storage=storage, network=network, image=image, job=job_plan(profile, best.gpus_per_node, gpus, pick.layout),
        parallelism=parallelism_plan(profile, pick),
        spot_pool=spot_pool, self_healing=profile.resources.self_healing, tags=dict(profile.tags), labels=tuple(dict.fromkeys(labels)), reasons=tuple(reasons),
        alternatives=tuple(alternatives), rejected=tuple(rejected), catalog_date=catalog.newest_price_date,
        prices=provenance(catalog, quote, zone=best.zone, spot=best.spot))


def job_plan(profile: TrainingProfile, nproc_per_node: int, total_gpus: int,
             layout: Optional[Layout] = None) -> JobPlan:
    """What runs on the nodes (or pods), as the profile states it, with the plan's parallel layout."""
    t, j = profile.training, profile.job
    lay = layout or layout_for(t, total_gpus)
    return JobPlan(command=j.command, code_uri=j.code_uri, env=dict(j.env),
                   secrets={k: v.model_dump() for k, v in j.secrets.items()}, max_runtime_hours=j.max_runtime_hours,
                   max_total_cost_cny=profile.resources.max_total_cost, deadline_hours=profile.resources.deadline_hours,
                   nproc_per_node=nproc_per_node, method=t.method, precision=t.precision, zero_stage=t.zero_stage,
                   gradient_checkpointing=t.gradient_checkpointing, micro_batch_size=t.micro_batch_size,
                   sequence_length=t.sequence_length, gradient_accumulation_steps=t.accumulation_steps(lay.dp),
                   parallel=plan_layout(lay), global_batch_size=t.global_batch_size)


def candidate_layout(profile: TrainingProfile, inst, c: Candidate) -> LayoutPick:
    """The layout search of candidate ``c`` again (a cache hit: the same call evaluate made)."""
    layouts, _ = layout_options(profile, inst, c.nodes)
    gpu = inst.gpu
    network, bandwidth = node_network(inst, c.nodes, tcp=anchor_nodes(profile, c.target, c.nodes, c.spot) > 0)
    return choose_layout(profile.architecture, profile.training, gpu, inst.gpu_count, c.nodes, inst.interconnect,
                         network, bandwidth, layouts,
                         sizing.min_margin_gib(gpu.usable_gib, profile.resources.memory_margin_percent / 100.0))


def parallelism_plan(profile: TrainingProfile, pick: LayoutPick) -> ParallelismPlan:
    t, lay = profile.training, pick.layout
    m = micro_batches(t, lay)
    chunk = -(-profile.architecture.num_layers // (lay.pp * lay.vp)) if lay.pp > 1 else 0
    return ParallelismPlan(layout=plan_layout(lay), chosen_by="resolver" if pick.searched else "profile",
                           considered=pick.options, micro_batches=m,
                           micro_batches_in_flight=pick.memory.micro_batches_in_flight,
                           bubble_fraction=round(bubble_fraction(lay, m), 4), layers_per_chunk=chunk)


def layout_reasons(profile: TrainingProfile, pick: LayoutPick, where: str) -> list[str]:
    """Why this layout: the profile's own, or the search's winner against the pure data-parallel one."""
    lay, t = pick.layout, profile.training
    m = micro_batches(t, lay)
    out = []
    placed = []
    if lay.tp > 1:
        placed.append(f"TP {lay.tp} inside each node over NVLink/NVSwitch")
    if lay.pp > 1:
        placed.append(f"PP {lay.pp} stages ({m} micro-batches per step, {bubble_fraction(lay, m):.0%} bubble, "
                      f"{pick.memory.micro_batches_in_flight:g} in flight on the fullest stage)")
    if lay.cp > 1:
        placed.append(f"CP {lay.cp} (each sequence split over {lay.cp} GPUs)")
    placed.append(f"DP {lay.dp}" + (f" with ZeRO-{t.zero_stage}" if t.zero_stage else ""))
    head = f"layout {lay.label}: " + ", ".join(placed)
    if not pick.searched:
        out.append(head + " (as the profile states it)")
        return out
    fitting = [o for o in pick.options if o.fits]
    tps = pick.throughput.tokens_per_second
    text = (f"{head}; chosen by the resolver: the fastest of {len(fitting)} layout(s) that fit {where} "
            f"(of {len(pick.options)} sized; `resolve --all` lists them)")
    plain = next((o for o in pick.options if o.layout.trivial), None)
    if plain is not None and not plain.chosen:
        if not plain.fits:
            text += f"; data parallelism alone needs {plain.required_gib_per_gpu:.1f} GiB per GPU"
        elif plain.tokens_per_second and tps:
            text += (f"; data parallelism alone runs {plain.tokens_per_second:,.0f} tokens/s against "
                     f"{tps:,.0f}")
    out.append(text)
    return out


def _times(v: Optional[float], n: int) -> Optional[float]:
    return None if v is None else round(v * n, 4)
