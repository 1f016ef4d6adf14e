"""The placement engine: size, price, check and rank one way of running the job.

Both strategies (ECS nodes in ``ecs.py``, PAI-DLC jobs in ``dlc.py``) and the suggestions
(``suggest.py``) go through these functions (the parallel layout search is in ``layouts.py``), so a rule is written once and a candidate means the
same thing everywhere. Hard rules, in the order they are checked:

* per instance type (:func:`static_rejection`): training hardware with a known GPU; the profile's
  allow-lists; BF16 needs Ampere or newer and FP8 Hopper or Ada; several GPUs in one node only over
  NVLink/NVSwitch, unless the policy config's PCIe exception lists the type (``allowances.py``);
* per node count (:func:`node_counts`): whole nodes for ``resources.gpus``, ``max_nodes``, several
  nodes only over RDMA (eRDMA or RoCE);
* per candidate (:func:`rule_broken`): spot needs a known on-demand price and must not cost more;
  ZeRO needs more than one GPU; memory; deadline; hourly and total budget; a known speed and price.

Cost objective: the all-in total (``cost.cost_breakdown``: the nodes and every disk, file system, bucket
and NAT gateway the candidate would create) = hourly x hours, spot hours multiplied by
:data:`SPOT_RESTART_ALLOWANCE`; the hourly and total budgets count the same all-in figures.
Time objective: fewest hours. Ties break on the other measure, fewer nodes, on-demand first, then
the type name: the same inputs give the same plan.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Iterable, Literal, Optional

from .. import sizing
from ..catalog import TRAINING_RDMA, Catalog, PriceQuote, ResolvedInstance
from ..errors import InputError
from ..plan import Candidate, Plan, Rejection
from .. import calibration_overlay
from ..profile import TrainingProfile
from ..layout.network import healing_network
from ..layout.spot_pool import heals_multi_node
from ..reasons import Reason, ReasonCode, reason
from .allowances import NO_ALLOWANCES, PolicyAllowances
from .cost import Shape, breakdown_of, candidate_storage, compute_items, cost_breakdown, network_items
from .interconnect import pcie_rejection
from .layouts import (  # noqa: F401  (the ECS strategy reads the layout search from here too)
    LayoutPick, choose_layout, layout_options, plan_layout,
)

#: Spot runs take longer: reclaimed nodes, re-provisioning and replaying work since the last
#: checkpoint. 15% extra hours is a planning allowance (no source gives GPU interruption
#: rates); it makes spot win only when its discount beats the risk.
SPOT_RESTART_ALLOWANCE = 1.15
#: Without ``training.tokens`` the time objective ranks by hours per this many tokens.
TIME_REFERENCE_TOKENS = 1e9
#: RDMA kinds over which several nodes may train together.
RDMA_KINDS = TRAINING_RDMA


@dataclass
class Resolution:
    """Everything a strategy considered: the winner, the rest, and why; ``error``: what the Plan
    assembler found wrong with the winner's plan (bad input, exit 2; ``plan`` is None then)."""

    plan: Optional[Plan]
    candidates: list[Candidate] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    error: Optional[InputError] = None

    def assembled(self, assembly) -> "Resolution":
        """Take the assembler's Plan and error (trainstack.placement.assemble.Assembly)."""
        self.plan, self.error = assembly.plan, assembly.error
        return self


@dataclass(frozen=True)
class Option:
    """One way to run the job, before it is sized and priced."""

    inst: ResolvedInstance
    nodes: int
    spot: bool = False
    zone: Optional[str] = None
    labels: tuple[str, ...] = ()
    blocked: Optional[Reason] = None
    target: Literal["ecs", "dlc"] = "ecs"
    #: The price to use (a DLC spec per pod, a quota per GPU); default: the ECS quote of ``inst``
    quote: Optional[PriceQuote] = None


# ---- rules that need only the instance type ------------------------------------------------

def static_rejection(profile: TrainingProfile, inst: ResolvedInstance,
                     allowances: PolicyAllowances = NO_ALLOWANCES) -> Optional[Reason]:
    """The first per-type rule ``inst`` breaks; ``allowances``: the policy config's exceptions."""
    r, t = profile.resources, profile.training
    if not inst.family.training:
        return reason(ReasonCode.NOT_TRAINING_HARDWARE, "not training hardware (vGPU slice or special-purpose part)")
    if inst.gpu is None:
        return reason(ReasonCode.GPU_UNVERIFIED, "GPU model unverified: cannot size or trust it for training")
    if r.gpu_models and inst.gpu.name.lower() not in {g.lower() for g in r.gpu_models}:
        return reason(ReasonCode.NOT_IN_GPU_MODELS,
                      f"{inst.gpu.name} is not in resources.gpu_models ({', '.join(r.gpu_models)})")
    if r.instance_types and inst.name not in r.instance_types:
        return reason(ReasonCode.NOT_IN_INSTANCE_TYPES, "not in resources.instance_types")
    arch = inst.gpu.architecture
    if t.precision in ("bf16", "bf16-mixed") and not inst.gpu.supports_bf16:
        return reason(ReasonCode.NO_BF16, f"{inst.gpu.name} ({arch}) has no BF16: {t.precision} needs Ampere or newer")
    if t.precision == "fp8-mixed" and not inst.gpu.supports_fp8:
        return reason(ReasonCode.NO_FP8, f"{inst.gpu.name} ({arch}) has no FP8: fp8-mixed needs Hopper or Ada")
    if inst.gpu_count > 1 and not inst.multi_gpu_training_ok and not allowances.lifts(inst):
        return pcie_rejection(profile, inst)
    return None


def can_span_nodes(inst: ResolvedInstance) -> bool:
    return inst.rdma in RDMA_KINDS


def node_counts(profile: TrainingProfile, inst: ResolvedInstance) -> tuple[list[int], Optional[Reason]]:
    """The node counts to consider for this type, or why none works."""
    r = profile.resources
    if isinstance(r.gpus, int):
        if r.gpus % inst.gpu_count:
            if r.gpus < inst.gpu_count:
                return [], reason(ReasonCode.GPU_COUNT_MISMATCH,
                                  f"has {inst.gpu_count} GPUs per node; resources.gpus is {r.gpus}")
            return [], reason(ReasonCode.GPU_COUNT_MISMATCH,
                              f"{r.gpus} GPUs is not a whole number of {inst.gpu_count}-GPU nodes")
        n = r.gpus // inst.gpu_count
        if n > r.max_nodes:
            return [], reason(ReasonCode.TOO_MANY_NODES, f"needs {n} nodes for {r.gpus} GPUs; max_nodes is {r.max_nodes}")
        if n > 1 and not can_span_nodes(inst):
            return [], reason(ReasonCode.MULTI_NODE_WITHOUT_RDMA,
                              f"needs {n} nodes but has no RDMA (eRDMA/RoCE) for multi-node training")
        return [n], None
    top = r.max_nodes if can_span_nodes(inst) else 1
    return list(range(1, top + 1)), None


def dlc_rdma_reason(profile: TrainingProfile, pods: int) -> Optional[Reason]:
    """Several pods train together only over RDMA: a DLC job whose profile turns it off
    (``dlc.enable_rdma: false``) cannot have more than one (``multi-node-requires-rdma`` says the same)."""
    if pods > 1 and profile.dlc.enable_rdma is False:
        return reason(ReasonCode.MULTI_NODE_WITHOUT_RDMA,
                      f"needs {pods} pods but dlc.enable_rdma is false: several pods train together only over RDMA")
    return None


def zone_for(profile: TrainingProfile, catalog: Catalog, inst: ResolvedInstance,
             spot: bool = False) -> tuple[Optional[str], list[str], Optional[Reason]]:
    """(zone, labels, why the candidate cannot run there). Spot uses the zones where a refresh saw
    spot stock; the offline snapshot has no spot data, so there any listed zone is used."""
    labels: list[str] = []
    seen = catalog.seen_in(profile.region, inst.name)
    zones = sorted(seen.zones) if seen else []
    if spot and seen is not None and seen.spot_cny_per_hour is not None:
        zones = sorted(seen.spot_zones)
        if not zones:
            return None, labels, reason(ReasonCode.NO_SPOT_STOCK,
                                        f"no spot stock of {inst.name} in {profile.region} at the last refresh")
        if profile.zone and profile.zone not in zones:
            return None, labels, reason(ReasonCode.NO_SPOT_STOCK,
                                        f"no spot stock in {profile.zone} at the last refresh "
                                        f"(spot in: {', '.join(zones)})")
    if profile.zone:
        if zones and profile.zone not in zones:
            labels.append(f"{inst.name} was not seen offered in {profile.zone} (seen: {', '.join(zones)}); "
                          "availability unverified")
        return profile.zone, labels, None
    return (zones[0] if zones else None), labels, None


def unverified_labels(inst: ResolvedInstance) -> list[str]:
    out = []
    for what, rec in (("GPU", inst.gpu), ("family", inst.family), ("instance type", inst.type)):
        if rec is not None and rec.unverified:
            out.append(f"{what} {rec.name}: unverified {', '.join(rec.unverified)}")
    return out


# ---- one candidate: sized, priced, checked ------------------------------------------------------

def shipped_speed(profile: TrainingProfile, inst: ResolvedInstance, nodes: int) -> sizing.ThroughputEstimate:
    """The shipped model's speed of ``nodes`` x ``inst`` (no calibration overlay; `calibrate` compares
    a run with it)."""
    assert inst.gpu is not None
    return sizing.throughput_estimate(
        profile.architecture, profile.training, inst.gpu, gpus_per_node=inst.gpu_count, nodes=nodes,
        interconnect=inst.interconnect, network=inst.rdma if nodes > 1 else "none",
        network_gbps=inst.type.rdma_bandwidth_gbps or inst.type.network_bandwidth_gbps)


@dataclass(frozen=True)
class Sized:
    """One instance type and node count sized with its best layout: shared by its on-demand and spot
    options (sizing does not depend on the price)."""

    pick: "LayoutPick"
    layout_why: Optional[Reason]
    labels: tuple[str, ...]


def node_network(inst: ResolvedInstance, nodes: int, tcp: bool = False) -> tuple[str, Optional[float]]:
    """(RDMA kind, Gbit/s) the nodes talk over; ``tcp``: a multi-node self-healing plan, whose pool nodes get
    one ERI at most (trainstack.layout.network.healing_network: the whole ring at one ERI's bandwidth, or TCP)."""
    if nodes < 2:
        return "none", inst.type.rdma_bandwidth_gbps or inst.type.network_bandwidth_gbps
    if tcp:
        return healing_network(inst)
    return inst.rdma, inst.type.rdma_bandwidth_gbps or inst.type.network_bandwidth_gbps


def size(profile: TrainingProfile, inst: ResolvedInstance, nodes: int, arch=None, tcp: bool = False) -> Sized:
    """Memory and speed of ``nodes`` x ``inst`` with the best parallel layout (engine's layout search)."""
    t, r = profile.training, profile.resources
    gpu = inst.gpu
    assert gpu is not None, "static_rejection refuses types without a known GPU"
    arch = arch or profile.architecture
    layouts, layout_why = layout_options(profile, inst, nodes, arch)
    network, bandwidth = node_network(inst, nodes, tcp)
    pick = choose_layout(arch, t, gpu, inst.gpu_count, nodes, inst.interconnect, network, bandwidth, layouts,
                         sizing.min_margin_gib(gpu.usable_gib, r.memory_margin_percent / 100.0))
    labels = _sizing_labels(arch, t, nodes * inst.gpu_count, pick.throughput.labels)
    return Sized(pick, layout_why or pick.why, labels)


@functools.lru_cache(maxsize=8192)
def _sizing_labels(arch, t, gpus: int, speed_labels: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sizing.assumptions(arch, t, gpus)) + speed_labels


def evaluate(profile: TrainingProfile, catalog: Catalog, option: Option, sized: Optional[Sized] = None,
             arch=None) -> Candidate:
    """The option sized (memory, speed) with its best parallel layout, priced and checked against
    every candidate rule. ``sized``: the sizing of the same type and node count, when already done."""
    t, r = profile.training, profile.resources
    inst, nodes, spot = option.inst, option.nodes, option.spot
    gpus = nodes * inst.gpu_count
    gpu = inst.gpu
    assert gpu is not None, "static_rejection refuses types without a known GPU"
    healing = anchor_nodes(profile, option.target, nodes, spot) > 0
    sized = size(profile, inst, nodes, arch, tcp=True) if healing else (sized or size(profile, inst, nodes, arch))
    pick = sized.pick
    mem, thr = pick.memory, pick.throughput
    # a local measurement of this workload on this GPU, if `trainstack calibrate` recorded one (labelled)
    mem, thr, calibrated = calibration_overlay.adjust(arch or profile.architecture, t, gpu.name, mem, thr)
    margin = round(gpu.usable_gib - mem.required_gib_per_gpu, 2)
    fit = sizing.memory_fit(mem, gpu.usable_gib, sizing.min_margin_gib(gpu.usable_gib, r.memory_margin_percent / 100))
    tps = thr.tokens_per_second
    hours = (t.tokens / tps / 3600) if (t.tokens and tps) else None
    if hours is not None and spot:
        hours *= SPOT_RESTART_ALLOWANCE
    quote = option.quote or catalog.quote(profile.region, inst.name)
    cost = candidate_cost(profile, catalog, option, quote, mem.trainable_params, hours)
    hourly, total = cost.hourly_cny, cost.total_cny
    labels = option.labels + calibrated + sized.labels + quote.labels + (quote.spot_labels if spot else ())
    why = option.blocked or sized.layout_why or rule_broken(profile, gpu.name, gpu.usable_gib, gpus, spot, quote,
                                                            mem.required_gib_per_gpu, margin, tps, hours, hourly,
                                                            total)
    objective = None
    if why is None:
        if r.objective == "cost":
            objective = total if total is not None else hourly
        else:  # time; without training.tokens, hours per billion tokens ranks the same way
            objective = hours if hours is not None else TIME_REFERENCE_TOKENS / tps / 3600
    return Candidate(
        target=option.target, instance_type=inst.name, gpu_model=gpu.name, nodes=nodes, gpus_per_node=inst.gpu_count,
        spot=spot, zone=option.zone, hourly_cost_cny=hourly, compute_hourly_cny=cost.compute_hourly_cny,
        estimated_hours=None if hours is None else round(hours, 3), total_cost_cny=total, objective=objective,
        run_hours=hours,
        memory_margin_gib=margin, tokens_per_second=None if tps is None else round(tps, 1), fit=fit,
        layout=pick.plan_layout, labels=tuple(dict.fromkeys(labels)), feasible=why is None,
        reason=why.message if why else None, reason_code=why.code if why else None)


def candidate_shape(profile: TrainingProfile, target: str, nodes: int, gpus_per_node: int, spot: bool) -> Shape:
    """How a candidate's nodes are paid: a self-healing plan's pool, its on-demand anchor node 0."""
    return Shape(target=target, nodes=nodes, gpus_per_node=gpus_per_node, spot=spot,  # type: ignore[arg-type]
                 anchors=anchor_nodes(profile, target, nodes, spot),
                 pool=target == "ecs" and spot and profile.resources.self_healing,
                 compensate=profile.resources.spot == "allow")


def candidate_cost(profile: TrainingProfile, catalog: Catalog, option: Option, quote: PriceQuote,
                   trainable_params: Optional[int], hours: Optional[float]):
    """The all-in cost of what ``option`` would create (its storage layout and network) for ``hours``."""
    inst, nodes, spot = option.inst, option.nodes, option.spot
    shape = candidate_shape(profile, option.target, nodes, inst.gpu_count, spot)
    try:
        storage = candidate_storage(profile, option.target, inst, nodes, spot if option.target == "ecs" else
                                    profile.resources.spot == "require", trainable_params)
    except InputError:  # the assembler reports it for the winner; here the nodes alone still rank
        return breakdown_of(compute_items(quote, shape) + network_items(catalog, profile.region,
                                                                         profile.network.internet_egress), hours)
    return cost_breakdown(catalog, profile.region, quote, shape, storage, profile.network.internet_egress, hours)


def anchor_nodes(profile: TrainingProfile, target: str, nodes: int, spot: bool) -> int:
    """On-demand nodes of a spot plan: a multi-node self-healing plan keeps node 0 on-demand (it hosts
    the rendezvous a replacement joins; trainstack.layout.spot_pool), and its nodes talk TCP."""
    return 1 if target == "ecs" and heals_multi_node(profile, nodes, spot) else 0


def hourly_price(quote: PriceQuote, gpus_per_node: int, nodes: int, spot: bool, on_demand_nodes: int = 0
                 ) -> Optional[float]:
    """The instances' price per hour (None: a price is unknown); ``on_demand_nodes`` of a spot plan pay
    the on-demand price."""
    def times(unit: float, n: int) -> float:
        return unit * (gpus_per_node * n if quote.per == "GPU" else n)

    unit = quote.spot_cny_per_hour if spot else quote.on_demand_cny_per_hour
    if unit is None:
        return None
    if not (spot and on_demand_nodes):
        return round(times(unit, nodes), 4)
    if quote.on_demand_cny_per_hour is None:
        return None
    return round(times(unit, nodes - on_demand_nodes) + times(quote.on_demand_cny_per_hour, on_demand_nodes), 4)


def rule_broken(profile: TrainingProfile, gpu_name: str, usable_gib: float, gpus: int, spot: bool,
                quote: PriceQuote, required_gib: float, margin: float, tps: Optional[float],
                hours: Optional[float], hourly: Optional[float], total: Optional[float]) -> Optional[Reason]:
    """The first hard rule a sized and priced candidate breaks (None: feasible)."""
    t, r = profile.training, profile.resources
    on_demand, spot_price = quote.on_demand_cny_per_hour, quote.spot_cny_per_hour
    if spot and on_demand is None:
        return reason(ReasonCode.SPOT_WITHOUT_ON_DEMAND,
                      "spot needs a known on-demand price for its price limit (listed, never chosen)")
    if spot and spot_price is not None and spot_price > on_demand:
        return reason(ReasonCode.SPOT_ABOVE_ON_DEMAND,
                      f"spot ({spot_price:g} CNY/h) costs more than on-demand ({on_demand:g}): "
                      "the price limit would never be met")
    if t.zero_stage > 0 and gpus == 1:
        return reason(ReasonCode.ZERO_NEEDS_GPUS, f"zero_stage {t.zero_stage} needs more than one GPU")
    if margin < 0:
        return reason(ReasonCode.MEMORY, f"needs {required_gib:.1f} GiB per GPU, {gpu_name} has {usable_gib:.1f} GiB "
                                         f"usable (with {gpus} GPU{'s' if gpus > 1 else ''})")
    least = sizing.min_margin_gib(usable_gib, r.memory_margin_percent / 100.0)
    if margin < least:
        return reason(ReasonCode.MEMORY, f"needs {required_gib:.1f} GiB per GPU of {gpu_name}'s {usable_gib:.1f} GiB: "
                                         f"{margin:.1f} GiB left, under the {least:.1f} GiB minimum margin "
                                         f"(resources.memory_margin_percent {r.memory_margin_percent:g})")
    if r.deadline_hours is not None and hours is not None and hours > r.deadline_hours:
        return reason(ReasonCode.DEADLINE, f"takes {hours:.1f} h, deadline is {r.deadline_hours:g} h")
    if r.max_hourly_cost is not None and hourly is not None and hourly > r.max_hourly_cost:
        return reason(ReasonCode.HOURLY_BUDGET, f"costs {hourly:.2f} CNY/h all-in, max_hourly_cost is "
                                                f"{r.max_hourly_cost:g}")
    if r.max_total_cost is not None and total is not None and total > r.max_total_cost:
        return reason(ReasonCode.TOTAL_BUDGET, f"costs {total:.0f} CNY in total all-in, max_total_cost is "
                                               f"{r.max_total_cost:g}")
    if tps is None and (t.tokens or r.objective == "time"):
        return reason(ReasonCode.SPEED_UNKNOWN, f"speed unknown: {gpu_name} peak TFLOPS are not in the catalog")
    if hourly is None:
        return reason(ReasonCode.PRICE_UNKNOWN, "price unknown (listed, never chosen)")
    return None



# ---- ranking ------------------------------------------------------------------------------------

def rank_key(c: Candidate, objective: str) -> tuple:
    """Sort key: memory that fits with its interval before memory at risk (issue 32), then the objective,
    the other measure, fewer nodes, on-demand first, the type name."""
    second = c.estimated_hours if objective == "cost" else c.total_cost_cny
    return (c.fit == "at_risk", c.objective if c.objective is not None else math.inf,
            second if second is not None else math.inf,
            c.nodes, c.spot, c.instance_type or "")


def ranked(candidates: Iterable[Candidate], objective: str) -> list[Candidate]:
    """The feasible candidates, best first."""
    return sorted((c for c in candidates if c.feasible), key=lambda c: rank_key(c, objective))


def best(candidates: Iterable[Candidate], objective: str) -> Optional[Candidate]:
    feasible = ranked(candidates, objective)
    return feasible[0] if feasible else None


def closest(rows: list[Candidate]) -> Candidate:
    """The rejected candidate that came closest (largest memory margin, fewest nodes, on-demand)."""
    return sorted(rows, key=lambda c: (-(c.memory_margin_gib or -1e9), c.nodes, c.spot))[0]


def family_rejection(family: str, rows: list[tuple[str, Reason]]) -> Rejection:
    """One line for a family none of whose types can run the job."""
    messages = list(dict.fromkeys(why.message for _, why in rows))
    text = messages[0] if len(messages) == 1 else "; ".join(messages[:2]) + (" ..." if len(messages) > 2 else "")
    return Rejection(family=family, instance_types=tuple(n for n, _ in rows), reason=text,
                     reason_codes=tuple(dict.fromkeys(why.code for _, why in rows)))
