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

from .. import sizing
from ..catalog import Catalog, PriceQuote, ResolvedInstance, dlc_facts
from .. import calibration_overlay
from ..catalog.limits import service_limits
from ..errors import InfeasibleError
from ..layout import ERDMA_NCCL_ENV, bucket_name, plan_image, plan_network, plan_storage
from ..plan import (
    Candidate, DlcPlan, EstimateSummary, OssPlan, ParallelismPlan, ParallelLayout, Plan, StoragePlan,
    spot_price_limit,
)
from ..sizing.parallel import Layout, bubble_fraction, layout_for, micro_batches
from ..profile import TrainingProfile
from ..reasons import ReasonCode, reason
from .ecs import job_plan
from .engine import Option, Resolution, can_span_nodes, closest, evaluate, rank_key, ranked, static_rejection
from .layouts import plan_layout, searched_degrees
from .dlc_pods import (  # noqa: F401  (image_problem, quota_spec_problems: the rule book reads them here)
    DEFAULT_QUOTA_GPU, QuotaNode, dlc_image, image_problem, pod_resources, pod_view, quota_node, quota_spec_problems,
)
from .prices import provenance

#: PAI-DLC public resources: GPUs and vCPU per job unless raised (data/service_limits.yaml).
DLC_PUBLIC_MAX_GPUS = int(service_limits().number("pai.dlc.public.max_gpus"))
DLC_PUBLIC_MAX_VCPU = int(service_limits().number("pai.dlc.public.max_vcpu"))
#: A quota job of unset size is sized up to this many GPUs (doubling from 1).
QUOTA_MAX_AUTO_GPUS = 64
ALTERNATIVES_SHOWN = 5


def wants_dlc(profile: TrainingProfile) -> bool:
    """`target: dlc`, or `auto` with a PAI workspace or resource quota named in the profile."""
    r = profile.resources
    if r.target == "dlc":
        return True
    return r.target == "auto" and bool(profile.dlc.workspace_id or profile.dlc.resource_id)


# ---- candidates ----------------------------------------------------------------------------------

def within_public_limits(profile: TrainingProfile, inst: ResolvedInstance, pods: int) -> bool:
    if profile.dlc.public_limits_raised:
        return True
    vcpu = inst.type.vcpu if inst.type.vcpu is not None else DLC_PUBLIC_MAX_VCPU + 1
    return pods * inst.gpu_count <= DLC_PUBLIC_MAX_GPUS and pods * vcpu <= DLC_PUBLIC_MAX_VCPU


def public_candidates(profile: TrainingProfile, catalog: Catalog) -> list[Candidate]:
    """Every DLC public-resource spec x pod count the precision and interconnect rules allow, sized,
    priced at the DLC price (price book) and checked. A spec without a DLC price is feasible at an
    unknown cost (``hourly_cost_cny`` None) when it passes every other rule."""
    r = profile.resources
    out: list[Candidate] = []
    for inst in catalog.resolved_instances():
        if static_rejection(profile, inst):
            continue
        if isinstance(r.gpus, int):
            pods_options = [r.gpus // inst.gpu_count] if r.gpus % inst.gpu_count == 0 else []
        else:
            pods_options = [1, 2]
        for pods in pods_options:
            if pods < 1 or (pods > 1 and not can_span_nodes(inst)):
                continue  # several pods train together only over RDMA
            blocked = None
            if not within_public_limits(profile, inst, pods):
                blocked = reason(ReasonCode.DLC_PUBLIC_LIMIT,
                                 f"{pods * inst.gpu_count} GPUs / {pods * (inst.type.vcpu or 0)} vCPU exceed PAI-DLC's "
                                 f"public-resource limit of {DLC_PUBLIC_MAX_GPUS} GPUs / {DLC_PUBLIC_MAX_VCPU} vCPU")
            quote = catalog.quote(profile.region, inst.name, service="dlc")
            c = evaluate(profile, catalog, Option(inst, pods, False, profile.zone, blocked=blocked, target="dlc",
                                                  quote=quote))
            out.append(c.rejected_by(None) if c.reason_code == ReasonCode.PRICE_UNKNOWN else c)
    return out


def quota_candidates(profile: TrainingProfile, catalog: Catalog, node: QuotaNode, quote: PriceQuote) -> list[Candidate]:
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
        why = static_rejection(profile, pod)
        if why is None and total % per_pod:
            why = reason(ReasonCode.GPU_COUNT_MISMATCH, f"{total} GPUs is not a whole number of {per_node}-GPU nodes")
        if why is None and pods > r.max_nodes:
            why = reason(ReasonCode.TOO_MANY_NODES, f"needs {pods} pods for {total} GPUs; max_nodes is {r.max_nodes}")
        if why is None and pods > 1 and not can_span_nodes(pod):
            why = reason(ReasonCode.MULTI_NODE_WITHOUT_RDMA, f"needs {pods} pods but the quota's nodes have no RDMA")
        c = evaluate(profile, catalog, Option(pod, pods, False, profile.zone, tuple(node.labels), blocked=why,
                                              target="dlc", quote=quote))
        c = c.model_copy(update={"instance_type": None})
        out.append(c.rejected_by(None) if c.reason_code == ReasonCode.PRICE_UNKNOWN else c)
    return out


def sizing_layout(lay: ParallelLayout) -> Layout:
    return Layout(tp=lay.tensor_parallel, pp=lay.pipeline_parallel, cp=lay.context_parallel, dp=lay.data_parallel,
                  ep=lay.expert_parallel, vp=lay.virtual_pipeline_stages)


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

def resolve_dlc(profile: TrainingProfile, catalog: Catalog, ecs_res: Optional[Resolution] = None) -> Resolution:
    """The DLC plan (InfeasibleError, without suggestions, when no candidate passes every rule)."""
    t, r = profile.training, profile.resources
    labels: list[str] = []
    quota = profile.dlc.resource_id
    node: Optional[QuotaNode] = None
    if quota:
        node = quota_node(profile, catalog)
        quote = catalog.quote(profile.region, quota, service="dlc-quota")
        cands = quota_candidates(profile, catalog, node, quote)
        if not any(c.feasible for c in cands):
            raise infeasible(profile, cands, f"quota {quota}")
        chosen, rest = choose(profile, catalog, cands, quota=True)
        labels += node.labels
        if chosen.hourly_cost_cny is None:
            labels.append(f"quota {quota} has no price (a subscription, paid whether or not the job runs): GPU "
                          "count chosen by GPU-hours; add a `resource_id` price-book entry to cost it")
    else:
        cands = public_candidates(profile, catalog)
        if not any(c.feasible for c in cands):
            raise infeasible(profile, cands, "public resources")
        chosen, rest = choose(profile, catalog, cands, quota=False)
        quote = catalog.quote(profile.region, chosen.instance_type or "", service="dlc")
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
    labels += [lab for lab in chosen.labels if lab not in labels]
    gpus = chosen.nodes * chosen.gpus_per_node
    gpu_model = catalog.gpu(chosen.gpu_model or DEFAULT_QUOTA_GPU)
    inst = node.inst if node is not None else catalog.instance(chosen.instance_type or "")
    lay = sizing_layout(chosen.layout) if chosen.layout is not None else layout_for(t, gpus)
    mem = calibration_overlay.adjust_memory(profile.architecture, t, chosen.gpu_model,
                                            sizing.memory_estimate(profile.architecture, t, gpus, layout=lay))
    image, lookup, is_default, image_labels = dlc_image(profile, gpu_model)
    labels += image_labels
    spot = r.spot == "require" and not quota
    if r.spot == "require" and quota:
        labels.append("resources.spot: require does not apply to a quota job (a subscription): planned on the quota")
    limit = None
    if spot:
        od = quote.on_demand_cny_per_hour or catalog.quote(profile.region, inst.name).on_demand_cny_per_hour
        limit = spot_price_limit(od) if od else None
        if od and quote.on_demand_cny_per_hour is None:
            labels.append("DLC spot price limit = the ECS on-demand list price of the spec (no DLC price known)")
    envs = dict(profile.job.env)
    kind = node.kind if node is not None else None
    preset = None
    if kind == "lingjun":
        rdma = True
        preset = dlc_facts().spec(node.spec or "").nccl_preset
        vals = dlc_facts().preset(preset or "lingjun-default").env
        labels.append(f"Lingjun quota: RDMA on, PAI's NCCL preset left alone ({', '.join(f'{k}={v}' for k, v in list(vals.items())[:3])}"
                      ", ...) [PAI-RDMA]; trainstack adds no NCCL variables")
    else:
        rdma = profile.dlc.enable_rdma if profile.dlc.enable_rdma is not None else chosen.nodes > 1
        if rdma and chosen.nodes > 1 and inst.rdma == "erdma" and kind != "unknown":
            envs = {**ERDMA_NCCL_ENV, **envs}
            labels.append("NCCL over eRDMA as PAI-DLC configures it on eRDMA types [PAI-ERDMA]")
        elif rdma and kind == "unknown":
            labels.append("quota network unknown offline: trainstack adds no NCCL variables (PAI presets them for "
                          "the quota's RDMA network); set dlc.quota_spec to plan it")
    cpu, memory = inst.type.vcpu, inst.type.memory_gib
    if quota:
        cpu, memory, pod_labels = pod_resources(profile, node, chosen.gpus_per_node)
        labels += pod_labels
    alternatives = rest[:ALTERNATIVES_SHOWN]
    considered_all = list(cands)
    if ecs_res is not None:
        ecs_ok = ranked(ecs_res.candidates, r.objective)
        considered_all += ecs_res.candidates
        if ecs_ok:
            e = ecs_ok[0]
            labels.append(compare_label(e, chosen))
            alternatives = ecs_ok[:ALTERNATIVES_SHOWN] + alternatives
    max_minutes = int(profile.job.max_runtime_hours * 60) if profile.job.max_runtime_hours else (
        int(r.deadline_hours * 60) if r.deadline_hours else None)
    if quota:
        storage = StoragePlan(checkpoint="oss", checkpoint_path="/mnt/data/checkpoints",
                              oss=OssPlan(bucket=bucket_name(profile),
                                          internal_endpoint=f"oss-{profile.region}-internal.aliyuncs.com"),
                              dataset_uri=profile.storage.dataset_uri, dataset_gib=profile.storage.dataset_gib,
                              retain_on_destroy=profile.storage.retain_on_destroy)
    else:
        storage = plan_storage(profile, inst, chosen.nodes, spot, mem.trainable_params, stack_bucket_always=False)
    storage = storage.model_copy(update={"data_disk": None, "checkpoint_disk": None})
    hourly = chosen.hourly_cost_cny
    if spot and quote.spot_cny_per_hour is not None:
        hourly = round(quote.spot_cny_per_hour * chosen.nodes, 4)
    elif spot:
        hourly = None  # no DLC spot price known
    total = None if hourly is None or chosen.estimated_hours is None else round(hourly * chosen.estimated_hours, 2)
    dlc = DlcPlan(workspace_id=profile.dlc.workspace_id, resource_id=quota, job_type=profile.dlc.job_type,
                  image=image, image_lookup=lookup, image_is_default=is_default,
                  quota_spec=node.spec if node else None, quota_kind=kind, nccl_preset=preset,
                  ecs_spec=None if quota else chosen.instance_type,
                  pod_count=chosen.nodes, gpus_per_pod=chosen.gpus_per_node, cpu_per_pod=cpu,
                  memory_gib_per_pod=memory, enable_rdma=bool(rdma), spot=spot, spot_price_limit=limit,
                  command=profile.job.command, envs=envs, max_running_minutes=max_minutes)
    plan = Plan(
        name=profile.name, region=profile.region, zone=profile.zone, target="dlc",
        instance_type=None if quota else chosen.instance_type, gpu_model=gpu_model.name, nodes=chosen.nodes,
        gpus_per_node=chosen.gpus_per_node, total_gpus=gpus, spot=spot, spot_price_limit=limit,
        spot_strategy="SpotWithPriceLimit" if spot else "NoSpot", hourly_cost_cny=hourly,
        estimated_hours=chosen.estimated_hours, total_cost_cny=total, objective=r.objective,
        estimate=EstimateSummary(gpu_model=gpu_model.name, peak_gib_per_gpu=round(mem.peak_gib_per_gpu, 2),
                                 required_gib_per_gpu=round(mem.required_gib_per_gpu, 2),
                                 usable_gib_per_gpu=gpu_model.usable_gib, memory_margin_gib=chosen.memory_margin_gib,
                                 tokens_per_second=chosen.tokens_per_second,
                                 tokens_per_second_per_gpu=None if chosen.tokens_per_second is None
                                 else round(chosen.tokens_per_second / gpus, 1),
                                 estimated_hours=chosen.estimated_hours,
                                 on_demand_hourly_cny=chosen.hourly_cost_cny,
                                 spot_hourly_cny=None if quote.spot_cny_per_hour is None
                                 else round(quote.spot_cny_per_hour * chosen.nodes, 4),
                                 **sizing.summary_intervals(mem, None, None, chosen.fit)),
        storage=storage, network=plan_network(profile, None, chosen.nodes, spot), image=plan_image(profile, None),
        job=job_plan(profile, chosen.gpus_per_node, gpus, lay),
        parallelism=ParallelismPlan(layout=plan_layout(lay), chosen_by="resolver" if chosen.layout is not None and
                                    searched_degrees(profile) else "profile",
                                    micro_batches=micro_batches(t, lay),
                                    micro_batches_in_flight=mem.micro_batches_in_flight,
                                    bubble_fraction=round(bubble_fraction(lay, micro_batches(t, lay)), 4),
                                    layers_per_chunk=(-(-profile.architecture.num_layers // (lay.pp * lay.vp))
                                                      if lay.pp > 1 else 0)),
        dlc=dlc, tags=dict(profile.tags), labels=tuple(dict.fromkeys(labels)),
        reasons=(f"PAI-DLC: {'quota ' + quota if quota else 'public resources'}, {chosen.nodes} pod(s) x "
                 f"{chosen.gpus_per_node} {gpu_model.name}", f"layout {lay.label}"),
        alternatives=tuple(alternatives), rejected=tuple(ecs_res.rejected) if ecs_res else (),
        catalog_date=catalog.newest_price_date, prices=provenance(catalog, quote, zone=profile.zone, spot=spot))
    return Resolution(plan=plan, candidates=considered_all, rejected=list(plan.rejected))


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
