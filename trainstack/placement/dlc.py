"""The PAI-DLC strategy: a managed job on public resources (per-pod ECS spec) or on a quota.

Chosen when ``resources.target`` is ``dlc``, or ``auto`` with ``dlc.workspace_id`` or
``dlc.resource_id`` set (a team that named a PAI workspace or quota wants DLC). DLC prices are
not in the catalog, so a DLC plan's cost is unknown and says so; with ``auto``, the best ECS
alternative and its cost are listed beside it so an unknown cost never silently wins.
"""

from __future__ import annotations

import math
from typing import Optional

from .. import sizing
from ..sizing import calibration_overlay
from ..catalog import Catalog, ResolvedInstance
from ..catalog.limits import service_limits
from ..errors import InfeasibleError
from ..layout import ERDMA_NCCL_ENV, bucket_name, plan_image, plan_network, plan_storage
from ..plan import Candidate, DlcPlan, EstimateSummary, OssPlan, Plan, StoragePlan, spot_price_limit
from ..profile import TrainingProfile
from ..reasons import PRICE_CODES
from .ecs import job_plan
from .engine import Option, Resolution, can_span_nodes, evaluate, rank_key, ranked, static_rejection, zone_for

#: PAI-DLC public resources: GPUs and vCPU per job unless raised (data/service_limits.yaml).
DLC_PUBLIC_MAX_GPUS = int(service_limits().number("pai.dlc.public.max_gpus"))
DLC_PUBLIC_MAX_VCPU = int(service_limits().number("pai.dlc.public.max_vcpu"))
#: GPUs per pod on a quota (one 8-GPU node per pod is the Lingjun/general-computing norm).
QUOTA_GPUS_PER_POD = 8
DEFAULT_QUOTA_GPU = "A100-80G"
#: A quota job of unset size is sized up to this many GPUs (doubling from 1).
QUOTA_MAX_AUTO_GPUS = 64


def wants_dlc(profile: TrainingProfile) -> bool:
    """`target: dlc`, or `auto` with a PAI workspace or resource quota named in the profile."""
    r = profile.resources
    if r.target == "dlc":
        return True
    return r.target == "auto" and bool(profile.dlc.workspace_id or profile.dlc.resource_id)


def dlc_image(profile: TrainingProfile) -> tuple[str, bool, list[str]]:
    """The job image: the profile's, else the PAI PyTorch training image path of the region."""
    if profile.job.image:
        return profile.job.image, False, []
    repo = f"dsw-registry-vpc.{profile.region}.cr.aliyuncs.com/pai/pytorch-training"
    if profile.dlc.image_tag:
        return f"{repo}:{profile.dlc.image_tag}", True, [f"DLC image {repo}:{profile.dlc.image_tag} (tag pinned by dlc.image_tag)"]
    return repo, True, [f"DLC image {repo} has no tag: set dlc.image_tag to a tag that "
                        "AIWorkspace ListImages(labels=system.supported.dlc=true) lists (no tag is invented)"]


def within_public_limits(profile: TrainingProfile, inst: ResolvedInstance, pods: int) -> bool:
    if profile.dlc.public_limits_raised:
        return True
    vcpu = inst.type.vcpu if inst.type.vcpu is not None else DLC_PUBLIC_MAX_VCPU + 1
    return pods * inst.gpu_count <= DLC_PUBLIC_MAX_GPUS and pods * vcpu <= DLC_PUBLIC_MAX_VCPU


def public_candidates(profile: TrainingProfile, catalog: Catalog) -> list[Candidate]:
    """DLC public-resource specs that can run the job. DLC bills by its own price list, so a spec
    whose ECS price is unknown or over the budget is still a DLC candidate (its cost unknown)."""
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
            if pods < 1 or not within_public_limits(profile, inst, pods):
                continue
            if pods > 1 and not can_span_nodes(inst):
                continue  # several pods train together only over RDMA
            zone, _, _ = zone_for(profile, catalog, inst)
            c = evaluate(profile, catalog, Option(inst, pods, False, zone, target="dlc"))
            if c.feasible or c.reason_code in PRICE_CODES:
                out.append(c.rejected_by(None).model_copy(update={
                    "hourly_cost_cny": None, "total_cost_cny": None, "objective": c.hourly_cost_cny}))
    return out


def _no_public_spec(profile: TrainingProfile) -> InfeasibleError:
    t = profile.training
    return InfeasibleError(
        f"{profile.name}: no PAI-DLC public-resource spec fits (at most {DLC_PUBLIC_MAX_GPUS} GPUs and "
        f"{DLC_PUBLIC_MAX_VCPU} vCPU unless your account manager raises them)",
        suggestions=["use a DLC resource quota (dlc.resource_id)", "use ECS (resources.target: ecs)",
                     "if your account manager raised the limits: dlc.public_limits_raised: true"]
        + ([] if t.method == "qlora" else [f"train {'QLoRA' if t.method == 'lora' else 'LoRA/QLoRA'} adapters "
                                           "to fit fewer, smaller GPUs"])
        + ([] if t.gradient_checkpointing else ["enable gradient checkpointing"]))


def smallest_fit(profile: TrainingProfile, usable_gib: float, limit: int) -> Optional[int]:
    n = 1
    while n <= limit:
        if sizing.memory_estimate(profile.architecture, profile.training, n).required_gib_per_gpu <= usable_gib:
            return n
        n *= 2
    return None


def resolve_dlc(profile: TrainingProfile, catalog: Catalog, ecs_res: Optional[Resolution] = None) -> Resolution:
    t, r = profile.training, profile.resources
    labels = ["DLC cost unknown offline: PAI-DLC prices are not in the catalog"]
    quota = profile.dlc.resource_id
    cands: list[Candidate] = []
    inst: Optional[ResolvedInstance] = None
    if quota:
        gpu = catalog.gpu(r.gpu_models[0]) if r.gpu_models else catalog.gpu(DEFAULT_QUOTA_GPU)
        if not r.gpu_models:
            labels.append(f"quota GPU model unknown offline: sized for {gpu.name}; set resources.gpu_models")
        total = r.gpus if isinstance(r.gpus, int) else smallest_fit(profile, gpu.usable_gib, QUOTA_MAX_AUTO_GPUS)
        if total is None:
            raise InfeasibleError(
                f"{profile.name}: does not fit {gpu.name} GPUs on the quota even with {QUOTA_MAX_AUTO_GPUS} GPUs",
                suggestions=["enable gradient checkpointing", "use LoRA/QLoRA", "zero_stage: 3"])
        per_pod = min(total, QUOTA_GPUS_PER_POD)
        pods = math.ceil(total / per_pod)
        chosen = Candidate(target="dlc", instance_type=None, gpu_model=gpu.name, nodes=pods, gpus_per_node=per_pod,
                           labels=tuple(labels))
        rdma = profile.dlc.enable_rdma if profile.dlc.enable_rdma is not None else pods > 1
    else:
        cands = sorted(public_candidates(profile, catalog), key=lambda c: rank_key(c, "cost"))
        if not cands:
            raise _no_public_spec(profile)
        chosen = cands[0]
        inst = catalog.instance(chosen.instance_type or "")
        if chosen.objective is not None:
            labels.append(f"DLC spec {chosen.instance_type} ranked by its ECS list price as a proxy for DLC's price")
        else:
            labels.append(f"DLC spec {chosen.instance_type} has no ECS list price either: ranked by speed")
        if profile.dlc.public_limits_raised:
            labels.append(f"PAI-DLC public-resource limits ({DLC_PUBLIC_MAX_GPUS} GPUs, {DLC_PUBLIC_MAX_VCPU} vCPU) "
                          "taken as raised (dlc.public_limits_raised)")
        else:
            labels.append(f"PAI-DLC public resources are limited to {DLC_PUBLIC_MAX_GPUS} GPUs and "
                          f"{DLC_PUBLIC_MAX_VCPU} vCPU unless raised via your account manager")
        rdma = bool(profile.dlc.enable_rdma) or chosen.nodes > 1
    gpus = chosen.nodes * chosen.gpus_per_node
    mem = calibration_overlay.adjust_memory(profile.architecture, t, chosen.gpu_model,
                                            sizing.memory_estimate(profile.architecture, t, gpus))
    gpu_model = catalog.gpu(chosen.gpu_model or DEFAULT_QUOTA_GPU)
    image, is_default, image_labels = dlc_image(profile)
    labels += image_labels
    spot = r.spot == "require"
    limit = None
    if spot and inst is not None:
        od = catalog.quote(profile.region, inst.name).on_demand_cny_per_hour
        limit = spot_price_limit(od) if od else None
    envs = dict(profile.job.env)
    if rdma:
        envs.update(ERDMA_NCCL_ENV)
        labels.append("DLC eRDMA applies to jobs on subscription quotas (Lingjun / general computing) [PAI-ERDMA]")
    alternatives: tuple[Candidate, ...] = tuple(cands[1:6])
    if ecs_res is not None:
        ecs_ok = ranked(ecs_res.candidates, r.objective)
        if ecs_ok:
            e = ecs_ok[0]
            labels.append(f"ECS alternative {e.nodes} x {e.instance_type} costs "
                          f"{e.total_cost_cny or e.hourly_cost_cny} CNY (known); DLC was chosen because the "
                          "profile names a PAI workspace or quota, not on price")
            alternatives = tuple(ecs_ok[:5]) + alternatives
    max_minutes = int(profile.job.max_runtime_hours * 60) if profile.job.max_runtime_hours else (
        int(r.deadline_hours * 60) if r.deadline_hours else None)
    if inst is not None:
        storage = plan_storage(profile, inst, chosen.nodes, spot, mem.trainable_params, stack_bucket_always=False)
    else:
        storage = StoragePlan(checkpoint="oss", checkpoint_path="/mnt/data/checkpoints",
                              oss=OssPlan(bucket=bucket_name(profile),
                                          internal_endpoint=f"oss-{profile.region}-internal.aliyuncs.com"),
                              dataset_uri=profile.storage.dataset_uri, dataset_gib=profile.storage.dataset_gib,
                              retain_on_destroy=profile.storage.retain_on_destroy)
    storage = storage.model_copy(update={"data_disk": None})
    dlc = DlcPlan(workspace_id=profile.dlc.workspace_id, resource_id=quota, job_type=profile.dlc.job_type,
                  image=image, image_is_default=is_default, ecs_spec=None if quota else chosen.instance_type,
                  pod_count=chosen.nodes, gpus_per_pod=chosen.gpus_per_node,
                  cpu_per_pod=(inst.type.vcpu if inst else None),
                  memory_gib_per_pod=(inst.type.memory_gib if inst else None),
                  enable_rdma=rdma, spot=spot, spot_price_limit=limit, command=profile.job.command, envs=envs,
                  max_running_minutes=max_minutes)
    plan = Plan(
        name=profile.name, region=profile.region, zone=profile.zone, target="dlc",
        instance_type=None if quota else chosen.instance_type, gpu_model=gpu_model.name, nodes=chosen.nodes,
        gpus_per_node=chosen.gpus_per_node, total_gpus=gpus, spot=spot, spot_price_limit=limit,
        spot_strategy="SpotWithPriceLimit" if spot else "NoSpot", hourly_cost_cny=None,
        estimated_hours=chosen.estimated_hours, total_cost_cny=None, objective=r.objective,
        estimate=EstimateSummary(gpu_model=gpu_model.name, peak_gib_per_gpu=round(mem.peak_gib_per_gpu, 2),
                                 required_gib_per_gpu=round(mem.required_gib_per_gpu, 2),
                                 usable_gib_per_gpu=gpu_model.usable_gib,
                                 memory_margin_gib=round(gpu_model.usable_gib - mem.required_gib_per_gpu, 2),
                                 tokens_per_second=chosen.tokens_per_second, estimated_hours=chosen.estimated_hours),
        storage=storage, network=plan_network(profile, None, chosen.nodes, spot), image=plan_image(profile, None),
        job=job_plan(profile, chosen.gpus_per_node, gpus),
        dlc=dlc, tags=dict(profile.tags), labels=tuple(dict.fromkeys(labels)),
        reasons=(f"PAI-DLC: {'quota ' + quota if quota else 'public resources'}, {chosen.nodes} pod(s) x "
                 f"{chosen.gpus_per_node} {gpu_model.name}",),
        alternatives=alternatives, rejected=tuple(ecs_res.rejected) if ecs_res else (),
        catalog_date=catalog.newest_price_date)
    return Resolution(plan=plan, candidates=cands, rejected=list(plan.rejected))
