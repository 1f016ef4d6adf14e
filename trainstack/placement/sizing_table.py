"""Each GPU model sized the way ``resolve`` sizes it: the table ``trainstack estimate`` prints (issue 36).

Nothing here re-derives a rule: the ECS strategy's own enumeration (``ecs.considered``: per-type rules,
node counts from resources.gpus / max_nodes / RDMA, the layout search, the calibration overlay, the fit
rule, prices and the ranking) runs once for every GPU model, and each GPU model's row is its best
candidate: the feasible one ``resolve`` ranks first (so, when resolve plans that GPU model, the same
type, nodes and layout), else the one that fits memory with the fewest nodes, else the engine's
closest. The row is then re-sized with the same engine call (``engine.size``, cached) for the memory
breakdown the estimate prints.

GPU models no catalog type sells (``estimate_only``) or that no type can run here get the same layout
search on assumed 8-GPU NVLink nodes (with ``gpus: auto`` the fewest of 1, 2, 4, ... max_nodes nodes that
fit), labelled, never presented as something resolve would plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

from .. import calibration_overlay, sizing
from ..catalog import Catalog, GpuModel, ResolvedInstance
from ..plan import Candidate, ParallelLayout
from ..profile import TrainingProfile
from ..reasons import Reason, ReasonCode
from .ecs import considered
from .engine import anchor_nodes, node_counts, rank_key, ranked, size, static_rejection
from ..sizing.parallel import Layout
from .layouts import LayoutPick, assumed_node_options, choose_layout

#: GPUs per node assumed for a GPU model no catalog type sells (the common NVLink/NVSwitch node).
ASSUMED_GPUS_PER_NODE = 8


@dataclass(frozen=True)
class GpuSizing:
    """One GPU model's row: where it was sized, with which layout, and what the engine says of it."""

    gpu: GpuModel
    memory: sizing.MemoryEstimate
    throughput: sizing.ThroughputEstimate
    layout: ParallelLayout
    nodes: int
    gpus_per_node: int
    least_margin_gib: float
    sizing_layout: Layout
    instance_type: Optional[str] = None
    candidate: Optional[Candidate] = None
    #: ``resolve``'s pick | ``fits memory, rejected`` | ``closest`` | ``assumed nodes``
    sized_on: str = "resolve's pick"
    #: resolve would accept this row (every rule of the engine, resources.gpu_models included)
    feasible: bool = False
    reason: Optional[str] = None
    reason_code: Optional[str] = None
    labels: tuple[str, ...] = ()

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def fit(self) -> sizing.Fit:
        return sizing.memory_fit(self.memory, self.gpu.usable_gib, self.least_margin_gib)


def margin_fraction(profile: TrainingProfile) -> float:
    return profile.resources.memory_margin_percent / 100.0


def sizing_table(profile: TrainingProfile, catalog: Catalog, gpus: list[GpuModel],
                 gpu_count: Optional[int] = None) -> list[GpuSizing]:
    """One row per GPU model in ``gpus`` (in that order); ``gpu_count``: ``--gpus`` (else resources.gpus,
    where ``auto`` lets the engine try every node count up to max_nodes)."""
    variant = _variant(profile, gpus, gpu_count)
    by_gpu: dict[str, list[Candidate]] = {}
    for c in considered(variant, catalog).candidates:
        by_gpu.setdefault(c.gpu_model or "", []).append(c)
    rows = []
    for gpu in gpus:
        cands = by_gpu.get(gpu.name, [])
        rows.append(_engine_row(profile, variant, catalog, gpu, cands) if cands else
                    _assumed_row(profile, variant, catalog, gpu))
    return rows


def _variant(profile: TrainingProfile, gpus: list[GpuModel], gpu_count: Optional[int]) -> TrainingProfile:
    """The profile with every listed GPU model allowed (estimate sizes them all; the real allow-list
    becomes a row's reason) and ``--gpus`` as resources.gpus."""
    update: dict = {"gpu_models": tuple(g.name for g in gpus)}
    if gpu_count is not None:
        update["gpus"] = gpu_count
    return profile.model_copy(update={"resources": profile.resources.model_copy(update=update)})


def pick(cands: list[Candidate], objective: str) -> tuple[Candidate, str]:
    """A GPU model's row among its candidates: resolve's order over the feasible ones, else the one that
    fits memory (fits before at_risk) with the fewest nodes, else the engine's closest (largest margin)."""
    feasible = ranked(cands, objective)
    if feasible:
        return feasible[0], "resolve's pick"
    fitting = [c for c in cands if c.fit in ("fits", "at_risk")]
    if fitting:
        return min(fitting, key=lambda c: (c.fit == "at_risk", c.nodes, c.spot, c.instance_type or "")), \
            "fits memory, rejected"
    return min(cands, key=lambda c: (-(c.memory_margin_gib if c.memory_margin_gib is not None else -math.inf),
                                     c.nodes, c.spot, c.instance_type or "")), "closest"


def _engine_row(profile: TrainingProfile, variant: TrainingProfile, catalog: Catalog, gpu: GpuModel,
                cands: list[Candidate]) -> GpuSizing:
    best, how = pick(cands, profile.resources.objective)
    inst = catalog.instance(best.instance_type or "")
    # the engine's own sizing of that candidate (evaluate's call: a self-healing spot plan talks TCP)
    sized = size(variant, inst, best.nodes, tcp=anchor_nodes(variant, best.target, best.nodes, best.spot) > 0)
    mem, thr, labels = calibration_overlay.adjust(profile.architecture, profile.training, gpu.name,
                                                  sized.pick.memory, sized.pick.throughput)
    excluded = static_rejection(profile, inst)  # the profile's own allow-lists (gpu_models) say no
    why_msg = excluded.message if excluded else best.reason
    why_code = excluded.code if excluded else best.reason_code
    return GpuSizing(gpu=gpu, memory=mem, throughput=thr, layout=sized.pick.plan_layout, sizing_layout=sized.pick.layout,
                     nodes=best.nodes,
                     gpus_per_node=best.gpus_per_node, instance_type=inst.name, candidate=best, sized_on=how,
                     least_margin_gib=sizing.min_margin_gib(gpu.usable_gib, margin_fraction(profile)),
                     feasible=best.feasible and excluded is None, reason=why_msg,
                     reason_code=None if why_code is None else ReasonCode(why_code).value,
                     labels=tuple(labels) + sized.labels)


def _assumed_row(profile: TrainingProfile, variant: TrainingProfile, catalog: Catalog,
                 gpu: GpuModel) -> GpuSizing:
    """A GPU model with no candidate: no catalog type sells it, or none passes the per-type and node-count
    rules (their first reason is the row's); sized on assumed NVLink nodes with the same layout search."""
    why = None if gpu.estimate_only else _first_reason(variant, catalog, gpu)
    least = sizing.min_margin_gib(gpu.usable_gib, margin_fraction(profile))
    r = variant.resources
    counts = [r.gpus] if isinstance(r.gpus, int) else [1] + [ASSUMED_GPUS_PER_NODE * n for n in _doublings(r.max_nodes)]
    chosen = None
    for count in counts:
        per_node = max(d for d in range(1, ASSUMED_GPUS_PER_NODE + 1) if count % d == 0)
        pick_ = _assumed_pick(variant, gpu, per_node, count // per_node, least)
        chosen = pick_ if chosen is None or pick_[0].memory.required_gib_per_gpu < \
            chosen[0].memory.required_gib_per_gpu else chosen
        if sizing.memory_fit(pick_[0].memory, gpu.usable_gib, least) != "does_not_fit":
            chosen = pick_
            break
    assert chosen is not None
    lp, per_node, nodes, layout_why = chosen
    mem, thr, labels = calibration_overlay.adjust(profile.architecture, profile.training, gpu.name,
                                                  lp.memory, lp.throughput)
    what = (f"no catalog type sells {gpu.name}" if gpu.estimate_only else
            f"no {gpu.name} type can run this job ({why.message})" if why else f"no {gpu.name} type is listed")
    label = f"{what}: sized on {nodes} assumed {per_node}-GPU NVLink node(s) over eRDMA; resolve cannot plan it"
    reason_ = why or layout_why or lp.why
    return GpuSizing(gpu=gpu, memory=mem, throughput=thr, layout=lp.plan_layout, sizing_layout=lp.layout, nodes=nodes, gpus_per_node=per_node,
                     least_margin_gib=least, sized_on="assumed nodes", feasible=False,
                     reason=reason_.message if reason_ else what,
                     reason_code=None if reason_ is None else reason_.code.value,
                     labels=(label, *labels))


def _doublings(top: int) -> list[int]:
    """1, 2, 4, ... up to ``top``, and ``top``: the node counts tried on assumed nodes (not every count up to
    512: an assumed node is a rough guide, and the memory per GPU mostly falls as nodes are added)."""
    return sorted({*(1 << i for i in range(top.bit_length()) if 1 << i <= top), top})


def _assumed_pick(profile: TrainingProfile, gpu: GpuModel, per_node: int, nodes: int,
                  least: float) -> tuple[LayoutPick, int, int, Optional[Reason]]:
    layouts, why = assumed_node_options(profile, per_node, nodes)
    network = "erdma" if nodes > 1 else "none"
    return (choose_layout(profile.architecture, profile.training, gpu, per_node, nodes, "nvlink", network, None,
                          layouts, least), per_node, nodes, why)


def _first_reason(profile: TrainingProfile, catalog: Catalog, gpu: GpuModel) -> Optional[Reason]:
    """Why no type of ``gpu`` became a candidate: the engine's per-type, then node-count reason."""
    for inst in _types_of(catalog, gpu):
        why = static_rejection(profile, inst) or node_counts(profile, inst)[1]
        if why is not None:
            return why
    return None


def _types_of(catalog: Catalog, gpu: GpuModel) -> list[ResolvedInstance]:
    return [i for i in catalog.resolved_instances() if i.gpu is not None and i.gpu.name == gpu.name]


def describes(rows: list[GpuSizing], asked: Optional[str]) -> tuple[GpuSizing, str]:
    """The row the top-level memory describes and why: ``--gpu``, else the cheapest row resolve would
    accept (the engine's cost order), else the cheapest that fits memory, else the closest."""
    if asked is not None:
        return next(r for r in rows if r.gpu.name == asked), "--gpu"
    def cost(r: GpuSizing) -> tuple:
        return rank_key(r.candidate, "cost") if r.candidate is not None else (True, math.inf)
    ok = [r for r in rows if r.feasible]
    if ok:
        return min(ok, key=cost), "cheapest feasible"
    fitting = [r for r in rows if r.fit != "does_not_fit"]
    if fitting:  # fits memory, but some other rule (price, budget, allow-list) stops resolve
        return min(fitting, key=lambda r: (r.candidate is None, r.fit == "at_risk", *cost(r))), "cheapest feasible"
    return max(rows, key=lambda r: (r.gpu.usable_gib - r.memory.required_gib_per_gpu, -r.gpus)), \
        "closest (nothing fits)"
