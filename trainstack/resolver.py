"""From a profile to the cheapest (or fastest) correct place to run it, with reasons.

Every catalog instance type in the region (and types seen only in other mainland regions,
labelled "availability unverified") is expanded into candidates: node count x pricing
(on-demand, spot). Each candidate is checked against hard rules; the feasible ones with a
known price are ranked by the objective. Rules, in the order they are checked:

* the family is training hardware with a known GPU (vGPU slices and unverified GPUs never);
* the profile's allow-lists (``gpu_models``, ``instance_types``) and ``resources.gpus``;
* precision support: BF16 needs Ampere or newer, FP8 needs Hopper or Ada;
* several GPUs in one node only over NVLink/NVSwitch (PCIe-only and unverified interconnects
  are refused for multi-GPU training);
* several nodes only on RDMA types (eRDMA or RoCE), all in one zone;
* ``zero_stage`` > 0 only with more than one GPU;
* memory: the sizing model's ``required_gib_per_gpu`` (ZeRO sharded over all GPUs) fits;
* deadline, ``max_hourly_cost``, ``max_total_cost``; spot ``never``/``require``.

Cost objective: total = hourly x hours; spot hours are multiplied by
:data:`SPOT_RESTART_ALLOWANCE` for interruptions, restarts and lost work since the last
checkpoint. Time objective: fewest hours within the budget. Ties break on cost/hours, then
fewer nodes, on-demand before spot, then the type name: the same inputs give the same plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional

from . import sizing
from .catalog import Catalog, ResolvedInstance, load_catalog
from .errors import InfeasibleError, InputError, Problem, did_you_mean
from .layout import plan_image, plan_network, plan_spot_pool, plan_storage
from .plan import (
    Candidate, DlcPlan, EstimateSummary, JobPlan, Plan, Rejection, spot_price_limit,
)
from .profile import TrainingProfile

#: Spot runs take longer: reclaimed nodes, re-provisioning and replaying work since the last
#: checkpoint. 15% extra hours is a planning allowance (no source gives GPU interruption
#: rates); it makes spot win only when its discount beats the risk.
SPOT_RESTART_ALLOWANCE = 1.15
ALTERNATIVES_SHOWN = 8
#: Without ``training.tokens`` the time objective ranks by hours per this many tokens.
TIME_REFERENCE_TOKENS = 1e9
BF16_ARCHS = {"ampere", "ada", "hopper", "blackwell"}
FP8_ARCHS = {"ada", "hopper", "blackwell"}


@dataclass
class Resolution:
    """Everything the resolver considered: the winner, the rest, and why."""

    plan: Optional[Plan]
    candidates: list[Candidate] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)


# ---- static checks (per instance type) -----------------------------------------------------

def _static_rejection(profile: TrainingProfile, inst: ResolvedInstance) -> Optional[str]:
    r, t = profile.resources, profile.training
    if not inst.family.training:
        return "not training hardware (vGPU slice or special-purpose part)"
    if inst.gpu is None:
        return "GPU model unverified: cannot size or trust it for training"
    if r.gpu_models and inst.gpu.name.lower() not in {g.lower() for g in r.gpu_models}:
        return f"{inst.gpu.name} is not in resources.gpu_models ({', '.join(r.gpu_models)})"
    if r.instance_types and inst.name not in r.instance_types:
        return "not in resources.instance_types"
    arch = inst.gpu.architecture
    if t.precision in ("bf16", "bf16-mixed") and not inst.gpu.supports_bf16:
        return f"{inst.gpu.name} ({arch}) has no BF16: {t.precision} needs Ampere or newer"
    if t.precision == "fp8-mixed" and not inst.gpu.supports_fp8:
        return f"{inst.gpu.name} ({arch}) has no FP8: fp8-mixed needs Hopper or Ada"
    if inst.gpu_count > 1 and not inst.multi_gpu_training_ok:
        how = "PCIe only" if inst.interconnect == "pcie" else "an unverified interconnect"
        return (f"{inst.gpu_count} {inst.gpu.name} GPUs on {how}: multi-GPU training needs NVLink/NVSwitch "
                "(Alibaba warns PCIe may corrupt Transformer training)")
    return None


def _node_counts(profile: TrainingProfile, inst: ResolvedInstance) -> tuple[list[int], Optional[str]]:
    r = profile.resources
    can_span = inst.rdma in ("erdma", "roce")
    if isinstance(r.gpus, int):
        if r.gpus % inst.gpu_count:
            if r.gpus < inst.gpu_count:
                return [], f"has {inst.gpu_count} GPUs per node; resources.gpus is {r.gpus}"
            return [], f"{r.gpus} GPUs is not a whole number of {inst.gpu_count}-GPU nodes"
        n = r.gpus // inst.gpu_count
        if n > r.max_nodes:
            return [], f"needs {n} nodes for {r.gpus} GPUs; max_nodes is {r.max_nodes}"
        if n > 1 and not can_span:
            return [], f"needs {n} nodes but has no RDMA (eRDMA/RoCE) for multi-node training"
        return [n], None
    top = r.max_nodes if can_span else 1
    return list(range(1, top + 1)), None


# ---- evaluation of one candidate ------------------------------------------------------------

@dataclass(frozen=True)
class _Eval:
    cand: Candidate
    hourly: Optional[float]
    hours: Optional[float]
    margin: float


def _evaluate(profile: TrainingProfile, catalog: Catalog, inst: ResolvedInstance, nodes: int,
              spot: bool, zone: Optional[str], base_labels: tuple[str, ...], blocked: Optional[str] = None) -> _Eval:
    t, r = profile.training, profile.resources
    gpus = nodes * inst.gpu_count
    gpu = inst.gpu
    assert gpu is not None
    mem = sizing.memory_estimate(profile.architecture, t, gpus)
    margin = round(gpu.usable_gib - mem.required_gib_per_gpu, 2)
    thr = sizing.throughput_estimate(
        profile.architecture, t, gpu, gpus_per_node=inst.gpu_count, nodes=nodes,
        interconnect=inst.interconnect, network=inst.rdma if nodes > 1 else "none",
        network_gbps=inst.type.rdma_bandwidth_gbps or inst.type.network_bandwidth_gbps)
    tps = thr.tokens_per_second
    hours = (t.tokens / tps / 3600) if (t.tokens and tps) else None
    if hours is not None and spot:
        hours *= SPOT_RESTART_ALLOWANCE
    quote = catalog.quote(profile.region, inst.name)
    unit = quote.spot_cny_per_hour if spot else quote.on_demand_cny_per_hour
    hourly = round(unit * nodes, 4) if unit is not None else None
    total = round(hourly * hours, 2) if (hourly is not None and hours is not None) else None
    labels = (list(base_labels) + list(sizing.assumptions(profile.architecture, t, gpus)) + list(thr.labels)
              + [lab for lab in quote.labels if spot or "spot price" not in lab])
    reason = blocked or _rejection(profile, gpu, gpus, spot, quote, mem.required_gib_per_gpu, margin, tps,
                                   hours, hourly, total)
    objective = None
    if reason is None:
        if r.objective == "cost":
            objective = total if total is not None else hourly
        else:  # time; without training.tokens, hours per billion tokens ranks the same way
            objective = hours if hours is not None else TIME_REFERENCE_TOKENS / tps / 3600
    cand = Candidate(
        target="ecs", instance_type=inst.name, gpu_model=gpu.name, nodes=nodes, gpus_per_node=inst.gpu_count,
        spot=spot, zone=zone, hourly_cost_cny=hourly, estimated_hours=None if hours is None else round(hours, 3),
        total_cost_cny=total, objective=objective, memory_margin_gib=margin,
        tokens_per_second=None if tps is None else round(tps, 1), feasible=reason is None, reason=reason,
        labels=tuple(dict.fromkeys(labels)))
    return _Eval(cand, hourly, hours, margin)


def _rejection(profile: TrainingProfile, gpu, gpus: int, spot: bool, quote, required_gib: float, margin: float,
               tps: Optional[float], hours: Optional[float], hourly: Optional[float],
               total: Optional[float]) -> Optional[str]:
    """The first hard rule a sized and priced candidate breaks, in a user's words (None: feasible)."""
    t, r = profile.training, profile.resources
    on_demand, spot_price = quote.on_demand_cny_per_hour, quote.spot_cny_per_hour
    if spot and on_demand is None:
        return "spot needs a known on-demand price for its price limit (listed, never chosen)"
    if spot and spot_price is not None and spot_price > on_demand:
        return f"spot ({spot_price:g} CNY/h) costs more than on-demand ({on_demand:g}): the price limit would never be met"
    if t.zero_stage > 0 and gpus == 1:
        return f"zero_stage {t.zero_stage} needs more than one GPU"
    if margin < 0:
        return (f"needs {required_gib:.1f} GiB per GPU, {gpu.name} has {gpu.usable_gib:.1f} GiB "
                f"usable (with {gpus} GPU{'s' if gpus > 1 else ''})")
    if r.deadline_hours is not None and hours is not None and hours > r.deadline_hours:
        return f"takes {hours:.1f} h, deadline is {r.deadline_hours:g} h"
    if r.max_hourly_cost is not None and hourly is not None and hourly > r.max_hourly_cost:
        return f"costs {hourly:.2f} CNY/h, max_hourly_cost is {r.max_hourly_cost:g}"
    if r.max_total_cost is not None and total is not None and total > r.max_total_cost:
        return f"costs {total:.0f} CNY in total, max_total_cost is {r.max_total_cost:g}"
    if tps is None and (t.tokens or r.objective == "time"):
        return f"speed unknown: {gpu.name} peak TFLOPS are not in the catalog"
    if hourly is None:
        return "price unknown (listed, never chosen)"
    return None


def _sort_key(c: Candidate, objective: str) -> tuple:
    second = c.estimated_hours if objective == "cost" else c.total_cost_cny
    return (c.objective if c.objective is not None else math.inf,
            second if second is not None else math.inf,
            c.nodes, c.spot, c.instance_type or "")


def _zone_for(profile: TrainingProfile, catalog: Catalog, inst: ResolvedInstance,
              spot: bool = False) -> tuple[Optional[str], list[str], Optional[str]]:
    """(zone, labels, reason the candidate cannot run there). Spot uses the zones where a refresh
    saw spot stock; the offline snapshot has no spot data, so there any listed zone is used."""
    labels: list[str] = []
    seen = catalog.seen_in(profile.region, inst.name)
    zones = sorted(seen.zones) if seen else []
    if spot and seen is not None and seen.spot_cny_per_hour is not None:
        zones = sorted(seen.spot_zones)
        if not zones:
            return None, labels, f"no spot stock of {inst.name} in {profile.region} at the last refresh"
        if profile.zone and profile.zone not in zones:
            return None, labels, f"no spot stock in {profile.zone} at the last refresh (spot in: {', '.join(zones)})"
    if profile.zone:
        if zones and profile.zone not in zones:
            labels.append(f"{inst.name} was not seen offered in {profile.zone} (seen: {', '.join(zones)}); "
                          "availability unverified")
        return profile.zone, labels, None
    if zones:
        return zones[0], labels, None
    return None, labels, None


def _unverified_labels(inst: ResolvedInstance) -> list[str]:
    out = []
    for what, rec in (("GPU", inst.gpu), ("family", inst.family), ("instance type", inst.type)):
        if rec is not None and rec.unverified:
            out.append(f"{what} {rec.name}: unverified {', '.join(rec.unverified)}")
    return out


# ---- main entry points ---------------------------------------------------------------------

def wants_dlc(profile: TrainingProfile) -> bool:
    """`target: dlc`, or `auto` with a PAI workspace or resource quota named in the profile."""
    r = profile.resources
    if r.target == "dlc":
        return True
    return r.target == "auto" and bool(profile.dlc.workspace_id or profile.dlc.resource_id)


def considered(profile: TrainingProfile, catalog: Optional[Catalog] = None) -> Resolution:
    """Every ECS candidate with its verdict (feasible or the reason it is not)."""
    catalog = catalog or load_catalog()
    check_catalog_names(profile, catalog)
    r = profile.resources
    spot_options = {"never": (False,), "allow": (False, True), "require": (True,)}[r.spot]
    cands: list[Candidate] = []
    by_family: dict[str, list[tuple[str, str]]] = {}
    for inst in catalog.resolved_instances():
        why = _static_rejection(profile, inst)
        nodes_list, count_why = ([], None) if why else _node_counts(profile, inst)
        why = why or count_why
        if why:
            by_family.setdefault(inst.family.name, []).append((inst.name, why))
            continue
        unverified = tuple(_unverified_labels(inst))
        placements = {spot: _zone_for(profile, catalog, inst, spot) for spot in spot_options}
        fam_rows: list[Candidate] = []
        for nodes in nodes_list:
            for spot in spot_options:
                zone, zlabels, blocked = placements[spot]
                fam_rows.append(_evaluate(profile, catalog, inst, nodes, spot, zone, tuple(zlabels) + unverified,
                                          blocked).cand)
        cands.extend(fam_rows)
        if not any(c.feasible for c in fam_rows):
            by_family.setdefault(inst.family.name, []).append(
                (inst.name, _closest_reason(fam_rows)))
    rejected = [Rejection(family=f, instance_types=tuple(n for n, _ in rows), reason=_family_reason(rows))
                for f, rows in sorted(by_family.items())
                if not any(c.feasible and c.instance_type and catalog.instance(c.instance_type).family.name == f
                           for c in cands)]
    return Resolution(plan=None, candidates=cands, rejected=rejected)


def _closest_reason(rows: list[Candidate]) -> str:
    # the reason of the candidate that came closest (largest memory margin, fewest nodes)
    rows = sorted(rows, key=lambda c: (-(c.memory_margin_gib or -1e9), c.nodes, c.spot))
    return rows[0].reason or "no feasible layout"


def _family_reason(rows: list[tuple[str, str]]) -> str:
    reasons = list(dict.fromkeys(w for _, w in rows))
    return reasons[0] if len(reasons) == 1 else "; ".join(reasons[:2]) + (" ..." if len(reasons) > 2 else "")


def check_catalog_names(profile: TrainingProfile, catalog: Catalog, file: Optional[str] = None) -> list[Problem]:
    """Every name in the profile that the catalog must know (region, GPU models, instance types),
    all reported at once with the profile's file, so `validate` catches them before `resolve`.

    Errors (exit 2, "did you mean"): an unknown region; a GPU model no sold type carries
    (unknown, or known only for estimates, e.g. H800: "not sold on Alibaba ECS"); an instance type
    the catalog lacks. Returned as warnings: listed types not seen offered in the profile's region.
    """
    problems = []
    warnings: list[Problem] = []
    if profile.region not in catalog.regions():
        problems.append(Problem(path="region", message="unknown region", given=profile.region, has_given=True,
                                allowed=", ".join(catalog.regions()),
                                suggestions=did_you_mean(profile.region, catalog.regions())))
    sold = sorted(g.name for g in catalog.gpus.values() if not g.estimate_only)
    by_lower = {k.lower(): g for k, g in catalog.gpus.items()}
    for i, g in enumerate(profile.resources.gpu_models):
        known = by_lower.get(g.lower())
        if known is None:
            problems.append(Problem(path=f"resources.gpu_models[{i}]", message="unknown GPU model", given=g,
                                    has_given=True, allowed=", ".join(sold), suggestions=did_you_mean(g, sold)))
        elif known.estimate_only:
            problems.append(Problem(path=f"resources.gpu_models[{i}]",
                                    message=f"GPU model {known.name} is not sold on Alibaba ECS (known for estimates only)",
                                    given=g, has_given=True, allowed=", ".join(sold),
                                    suggestions=_sold_alternatives(known, catalog)))
    for i, t in enumerate(profile.resources.instance_types):
        path = f"resources.instance_types[{i}]"
        try:
            inst = catalog.instance(t, path=path)
        except InputError as exc:
            problems.extend(exc.problems)
            continue
        if profile.region in catalog.regions() and catalog.seen_in(profile.region, inst.name) is None:
            warnings.append(Problem(path=path, message=f"not seen offered in {profile.region} in the price "
                                    f"snapshot of {catalog.snapshot_date} (availability unverified)",
                                    given=t, has_given=True, file=file))
    if problems:
        raise InputError(f"{file or 'profile'}: names the catalog does not know",
                         problems=[replace(p, file=file) for p in problems],
                         hint="`trainstack catalog --all` lists every region, GPU model and instance type")
    return warnings


def _sold_alternatives(gpu, catalog: Catalog, n: int = 2) -> list[str]:
    """Sold GPUs closest to an estimate-only one: same architecture first, then nearest memory."""
    sold = [g for g in catalog.gpus.values() if not g.estimate_only]
    ranked = sorted(sold, key=lambda g: (g.architecture != gpu.architecture, abs(g.memory_gb - gpu.memory_gb), g.name))
    return [g.name for g in ranked[:n]]


def resolve(profile: TrainingProfile, catalog: Optional[Catalog] = None) -> Plan:
    """The plan for ``profile``; :class:`InfeasibleError` (exit 3) when nothing fits."""
    return resolve_all(profile, catalog).plan  # type: ignore[return-value]


def resolve_all(profile: TrainingProfile, catalog: Optional[Catalog] = None) -> Resolution:
    catalog = catalog or load_catalog()
    if wants_dlc(profile):
        from .dlc_plan import resolve_dlc

        return resolve_dlc(profile, catalog, considered(profile, catalog) if profile.resources.target == "auto"
                           else None)
    res = considered(profile, catalog)
    feasible = sorted((c for c in res.candidates if c.feasible), key=lambda c: _sort_key(c, profile.resources.objective))
    if not feasible:
        raise _infeasible(profile, catalog, res)
    best = feasible[0]
    res.plan = build_plan(profile, catalog, best, feasible[1:ALTERNATIVES_SHOWN + 1], res.rejected)
    return res


def build_plan(profile: TrainingProfile, catalog: Catalog, best: Candidate, alternatives: Iterable[Candidate],
               rejected: Iterable[Rejection]) -> Plan:
    inst = catalog.instance(best.instance_type or "")
    t = profile.training
    gpus = best.nodes * best.gpus_per_node
    mem = sizing.memory_estimate(profile.architecture, t, gpus)
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
        storage=storage, network=network, image=image,
        job=JobPlan(command=profile.job.command, code_uri=profile.job.code_uri, env=dict(profile.job.env),
                    max_runtime_hours=profile.job.max_runtime_hours, nproc_per_node=best.gpus_per_node,
                    method=t.method, precision=t.precision, zero_stage=t.zero_stage,
                    gradient_checkpointing=t.gradient_checkpointing, micro_batch_size=t.micro_batch_size,
                    sequence_length=t.sequence_length),
        spot_pool=spot_pool, tags=dict(profile.tags), labels=tuple(dict.fromkeys(labels)), reasons=tuple(reasons),
        alternatives=tuple(alternatives), rejected=tuple(rejected), catalog_date=catalog.newest_price_date)


def _times(v: Optional[float], n: int) -> Optional[float]:
    return None if v is None else round(v * n, 4)


# ---- when nothing fits -----------------------------------------------------------------------

def _infeasible(profile: TrainingProfile, catalog: Catalog, res: Resolution) -> InfeasibleError:
    from .suggest import suggestions_for

    sugg = suggestions_for(profile, catalog, res)
    why = _summarise_why(res)
    return InfeasibleError(
        f"no feasible placement for {profile.name} in {profile.region}: {why}",
        suggestions=sugg,
        details={"rejected": [r.model_dump(mode="json") for r in res.rejected],
                 "candidates_considered": len(res.candidates)})


def _summarise_why(res: Resolution) -> str:
    """Counts per kind of rejection, most decisive first (budget and deadline before memory)."""
    reasons = [c.reason or "" for c in res.candidates if c.reason]
    if not reasons:
        return "every instance family was rejected (see below)" if res.rejected else "the catalog has no candidates"
    kinds = [("exceed the budget", lambda r: "max_" in r), ("miss the deadline", lambda r: "deadline" in r),
             ("do not fit in GPU memory", lambda r: "GiB per GPU" in r),
             ("have no known price", lambda r: "price unknown" in r), ("need more than one GPU", lambda r: "zero_stage" in r)]
    parts = [f"{n} candidates {text}" for text, hit in kinds if (n := sum(map(hit, reasons)))]
    return "; ".join(parts)
