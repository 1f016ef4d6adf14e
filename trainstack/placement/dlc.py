"""The PAI-DLC strategy: a managed job on public resources (per-pod ECS spec) or on a resource quota.

Chosen when ``resources.target`` is ``dlc``, or ``auto`` with ``dlc.workspace_id`` or
``dlc.resource_id`` set (a team that named a PAI workspace or quota wants DLC). Every DLC
candidate goes through the placement engine like an ECS one (precision, NVLink, RDMA, memory,
deadline, budget), so a rejection names its real cause with the engine's reason code.

* **Public resources**: each catalog ECS type is a DLC spec; at most 2 GPUs / 8 vCPU per job
  unless raised (``DLC_PUBLIC_LIMIT``). Alibaba publishes no per-spec DLC price [DLC-BILL], so a
  spec is priced only by the team's price book (``dlc_spec``); unpriced specs are ranked by their
  ECS list price as a proxy and their cost is unknown (never 0).
* **Quotas** (``dlc.resource_id``): pods on the quota's nodes. ``dlc.quota_spec`` names the node
  (an ECS type, or a Lingjun spec whose GPU the team states in the catalog overlay); without it the
  node is assumed from ``resources.gpu_models`` (labelled). Pod CPU and memory are the profile's,
  else the GPU share of the node. Priced per GPU-hour by the price book (``resource_id``); unpriced,
  quota jobs are ranked by GPU-hours (the capacity they take).
* **Lingjun**: RDMA on, and PAI's preset NCCL environment left alone (no eRDMA variables).
* **Image**: ``job.image``, else ``dlc.image_tag`` on PAI's repository, else PAI's official image
  looked up at deploy time (``ImageLookup``; the provider keeps the resolved image in its state).

The image, the quota's node and each pod's share of it are in ``dlc_pods.py``.
"""

from __future__ import annotations

import math
from typing import Optional

from ..catalog import Catalog, PriceQuote, ResolvedInstance
from ..catalog.limits import service_limits
from ..errors import InfeasibleError
from ..plan import Candidate
from ..profile import TrainingProfile
from ..reasons import ReasonCode, reason
from ..rules.dlc_profile import wants_dlc  # noqa: F401  (the strategy choice is the rule book's)
from .allowances import NO_ALLOWANCES, PolicyAllowances
from .assemble import Choice, assemble
from .dlc_pods import QuotaNode, pod_view, quota_node
from .engine import (
    Option, Resolution, can_span_nodes, closest, dlc_rdma_reason, evaluate, rank_key, ranked, static_rejection,
)

#: PAI-DLC public resources: GPUs and vCPU per job unless raised (data/service_limits.yaml).
DLC_PUBLIC_MAX_GPUS = int(service_limits().number("pai.dlc.public.max_gpus"))
DLC_PUBLIC_MAX_VCPU = int(service_limits().number("pai.dlc.public.max_vcpu"))
#: A quota job of unset size is sized up to this many GPUs (doubling from 1).
QUOTA_MAX_AUTO_GPUS = 64
ALTERNATIVES_SHOWN = 5


# ---- candidates ----------------------------------------------------------------------------------

def within_public_limits(profile: TrainingProfile, inst: ResolvedInstance, pods: int) -> bool:
    if profile.dlc.public_limits_raised:
        return True
    vcpu = inst.type.vcpu if inst.type.vcpu is not None else DLC_PUBLIC_MAX_VCPU + 1
    return pods * inst.gpu_count <= DLC_PUBLIC_MAX_GPUS and pods * vcpu <= DLC_PUBLIC_MAX_VCPU


def public_candidates(profile: TrainingProfile, catalog: Catalog,
                      allowances: PolicyAllowances = NO_ALLOWANCES) -> list[Candidate]:
    """Every DLC public-resource spec x pod count the precision and interconnect rules allow, sized,
    priced at the DLC price (price book) and checked. A spec without a DLC price is feasible at an
    unknown cost (``hourly_cost_cny`` None) when it passes every other rule."""
    r = profile.resources
    out: list[Candidate] = []
    for inst in catalog.resolved_instances():
        if static_rejection(profile, inst, allowances):
            continue
        type_labels = (allowances.pcie_label(inst.name),) if allowances.lifts(inst) else ()
        if isinstance(r.gpus, int):
            pods_options = [r.gpus // inst.gpu_count] if r.gpus % inst.gpu_count == 0 else []
        else:
            pods_options = [1, 2]
        for pods in pods_options:
            if pods < 1 or (pods > 1 and not can_span_nodes(inst)):
                continue  # several pods train together only over RDMA
            blocked = dlc_rdma_reason(profile, pods)
            if blocked is None and not within_public_limits(profile, inst, pods):
                blocked = reason(ReasonCode.DLC_PUBLIC_LIMIT,
                                 f"{pods * inst.gpu_count} GPUs / {pods * (inst.type.vcpu or 0)} vCPU exceed PAI-DLC's "
                                 f"public-resource limit of {DLC_PUBLIC_MAX_GPUS} GPUs / {DLC_PUBLIC_MAX_VCPU} vCPU")
            quote = catalog.quote(profile.region, inst.name, service="dlc")
            c = evaluate(profile, catalog, Option(inst, pods, False, profile.zone, type_labels, blocked=blocked,
                                                  target="dlc", quote=quote))
            out.append(c.rejected_by(None) if c.reason_code == ReasonCode.PRICE_UNKNOWN else c)
    return out


def quota_candidates(profile: TrainingProfile, catalog: Catalog, node: QuotaNode, quote: PriceQuote,
                     allowances: PolicyAllowances = NO_ALLOWANCES) -> list[Candidate]:
    """Pods on the quota's node for each GPU count (the profile's, or 1, 2, 4, ... up to the limit)."""
    r = profile.resources
    per_node = node.inst.gpu_count
    if isinstance(r.gpus, int):
        totals = [r.gpus]
    else:
        top = min(QUOTA_MAX_AUTO_GPUS, r.max_nodes * per_node)
        totals = [2 ** k for k in range(int(math.log2(max(1, top))) + 1)]
    out = []
    for total in totals:
        per_pod = min(total, per_node)
        pods = max(1, total // per_pod)
        pod = pod_view(node.inst, per_pod)
        why = static_rejection(profile, pod, allowances)
        pod_labels = tuple(node.labels) + ((allowances.pcie_label(pod.name),) if allowances.lifts(pod) else ())
        if why is None and total % per_pod:
            why = reason(ReasonCode.GPU_COUNT_MISMATCH, f"{total} GPUs is not a whole number of {per_node}-GPU nodes")
        if why is None and pods > r.max_nodes:
            why = reason(ReasonCode.TOO_MANY_NODES, f"needs {pods} pods for {total} GPUs; max_nodes is {r.max_nodes}")
        if why is None and pods > 1 and not can_span_nodes(pod):
            why = reason(ReasonCode.MULTI_NODE_WITHOUT_RDMA, f"needs {pods} pods but the quota's nodes have no RDMA")
        if why is None:
            why = dlc_rdma_reason(profile, pods)
        c = evaluate(profile, catalog, Option(pod, pods, False, profile.zone, pod_labels, blocked=why,
                                              target="dlc", quote=quote))
        c = c.model_copy(update={"instance_type": None})
        out.append(c.rejected_by(None) if c.reason_code == ReasonCode.PRICE_UNKNOWN else c)
    return out


def _proxy_key(c: Candidate, catalog: Catalog, region: str) -> tuple:
    """Unpriced public specs: the ECS list price of the same type stands in (labelled), then hours."""
    ecs = catalog.quote(region, c.instance_type or "").on_demand_cny_per_hour if c.instance_type else None
    proxy = None if ecs is None else ecs * c.nodes
    return (proxy is None, proxy or 0.0, c.estimated_hours or math.inf, c.nodes, c.instance_type or "")


def _gpu_hours_key(c: Candidate) -> tuple:
    gpu_hours = None if c.estimated_hours is None else c.estimated_hours * c.nodes * c.gpus_per_node
    return (gpu_hours is None, gpu_hours or 0.0, c.nodes * c.gpus_per_node)


def choose(profile: TrainingProfile, catalog: Catalog, cands: list[Candidate], quota: bool) -> tuple[Candidate, list[Candidate]]:
    """The best feasible candidate and the rest (priced ones by the objective, unpriced after them)."""
    objective = profile.resources.objective
    feasible = [c for c in cands if c.feasible]
    priced = ranked([c for c in feasible if c.hourly_cost_cny is not None], objective)
    unpriced = [c for c in feasible if c.hourly_cost_cny is None]
    if objective == "time":
        unpriced.sort(key=lambda c: rank_key(c, "time"))
    else:
        unpriced.sort(key=_gpu_hours_key if quota else (lambda c: _proxy_key(c, catalog, profile.region)))
    order = priced + unpriced
    return order[0], order[1:]


# ---- infeasible ----------------------------------------------------------------------------------

def infeasible(profile: TrainingProfile, cands: list[Candidate], where: str) -> InfeasibleError:
    """Nothing runs on DLC: the closest candidate's real cause (its engine reason); ``details`` carry
    the reason codes the caller's suggestions are chosen by (``placement.resolve_all``)."""
    near = closest(cands) if cands else None
    codes = {c.reason_code for c in cands if c.reason_code is not None}
    if near is None:
        why = "no spec passes the precision and interconnect rules"
    elif len(codes) == 1:
        why = str(near.reason)
    else:
        what = f"{near.nodes} pod(s) x {near.gpus_per_node} {near.gpu_model}"
        why = f"closest: {what}: {near.reason}"
    if codes == {ReasonCode.DLC_PUBLIC_LIMIT}:
        why = (f"no PAI-DLC public-resource spec fits within {DLC_PUBLIC_MAX_GPUS} GPUs and {DLC_PUBLIC_MAX_VCPU} vCPU "
               f"(the limit unless your account manager raises it); {why}")
    return InfeasibleError(f"{profile.name}: no feasible PAI-DLC placement on {where}: {why}",
                           details={"rejected": [], "candidates_considered": len(cands),
                                    "reason_codes": sorted(c.value for c in codes)})


# ---- the plan ------------------------------------------------------------------------------------

def resolve_dlc(profile: TrainingProfile, catalog: Catalog, ecs_res: Optional[Resolution] = None,
                allowances: PolicyAllowances = NO_ALLOWANCES) -> Resolution:
    """The DLC plan (InfeasibleError, without suggestions, when no candidate passes every rule)."""
    r = profile.resources
    labels: list[str] = []
    quota = profile.dlc.resource_id
    node: Optional[QuotaNode] = None
    if quota:
        node = quota_node(profile, catalog)
        quote = catalog.quote(profile.region, quota, service="dlc-quota")
        cands = quota_candidates(profile, catalog, node, quote, allowances)
        if not any(c.feasible for c in cands):
            raise infeasible(profile, cands, f"quota {quota}")
        chosen, rest = choose(profile, catalog, cands, quota=True)
        inst = pod_view(node.inst, chosen.gpus_per_node)
        labels += node.labels
        if chosen.hourly_cost_cny is None:
            labels.append(f"quota {quota} has no price (a subscription, paid whether or not the job runs): GPU "
                          "count chosen by GPU-hours; add a `resource_id` price-book entry to cost it")
    else:
        cands = public_candidates(profile, catalog, allowances)
        if not any(c.feasible for c in cands):
            raise infeasible(profile, cands, "public resources")
        chosen, rest = choose(profile, catalog, cands, quota=False)
        inst = catalog.instance(chosen.instance_type or "")
        quote = catalog.quote(profile.region, inst.name, service="dlc")
        if chosen.hourly_cost_cny is None:
            labels.append(f"DLC spec {chosen.instance_type} ranked by its ECS list price as a proxy for DLC's price "
                          "(not DLC's price; budgets are not checked against it)")
        if profile.dlc.public_limits_raised:
            labels.append(f"PAI-DLC public-resource limits ({DLC_PUBLIC_MAX_GPUS} GPUs, {DLC_PUBLIC_MAX_VCPU} vCPU) "
                          "taken as raised (dlc.public_limits_raised)")
        else:
            labels.append(f"PAI-DLC public resources are limited to {DLC_PUBLIC_MAX_GPUS} GPUs and "
                          f"{DLC_PUBLIC_MAX_VCPU} vCPU unless raised via your account manager")
    if chosen.hourly_cost_cny is None and not quota:
        labels.append("DLC cost unknown: Alibaba publishes no per-spec PAI-DLC price [DLC-BILL]; the team's price "
                      "book prices DLC specs (dlc_spec) and quotas (resource_id)")
    alternatives = rest[:ALTERNATIVES_SHOWN]
    considered_all = list(cands)
    comparison = None
    if ecs_res is not None:
        ecs_ok = ranked(ecs_res.candidates, r.objective)
        considered_all += ecs_res.candidates
        if ecs_ok:
            comparison = compare_label(ecs_ok[0], chosen)
            alternatives = ecs_ok[:ALTERNATIVES_SHOWN] + alternatives
    rejected = tuple(ecs_res.rejected) if ecs_res else ()
    res = Resolution(plan=None, candidates=considered_all, rejected=list(rejected))
    return res.assembled(assemble(profile, catalog, Choice(
        target="dlc", best=chosen, inst=inst, quote=quote, alternatives=tuple(alternatives), rejected=rejected,
        labels=tuple(labels), quota=node, comparison=comparison,
        exceptions=tuple(e for e in [allowances.exception_for(inst)] if e is not None))))


def compare_label(ecs: Candidate, dlc: Candidate) -> str:
    """DLC next to the best ECS plan, cost for cost where both are known (the `target: auto` rule decides)."""
    def cost(c: Candidate) -> str:
        if c.total_cost_cny is not None:
            return f"{c.total_cost_cny:,.2f} CNY"
        if c.hourly_cost_cny is not None:
            return f"{c.hourly_cost_cny:,.2f} CNY/h"
        return "unknown"

    head = (f"cost: best ECS plan {ecs.nodes} x {ecs.instance_type} {cost(ecs)} vs DLC {cost(dlc)}")
    if dlc.total_cost_cny is not None and ecs.total_cost_cny is not None:
        cheaper = "DLC" if dlc.total_cost_cny < ecs.total_cost_cny else "ECS"
        head += f" ({cheaper} is cheaper by {abs(dlc.total_cost_cny - ecs.total_cost_cny):,.2f} CNY)"
    return head + ("; DLC is planned because the profile names a PAI workspace or quota (`target: auto`), not on "
                   "price; `resources.target: ecs` plans the ECS one")
