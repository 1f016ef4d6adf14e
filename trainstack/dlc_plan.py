"""PAI-DLC placements: a managed job on public resources (per-pod ECS spec) or on a quota.

Chosen when ``resources.target`` is ``dlc``, or ``auto`` with ``dlc.workspace_id`` or
``dlc.resource_id`` set (a team that named a PAI workspace or quota wants DLC). DLC prices
are not in the catalog, so a DLC plan's cost is unknown and says so; with ``auto``, the best
ECS alternative and its cost are listed beside it so an unknown cost never silently wins.
"""

from __future__ import annotations

import math
from typing import Optional

from . import sizing
from .catalog import Catalog
from .errors import InfeasibleError
from .layout import ERDMA_NCCL_ENV, plan_image, plan_network, plan_storage
from .plan import Candidate, DlcPlan, EstimateSummary, JobPlan, Plan, spot_price_limit

#: PAI-DLC public resources: at most 2 GPUs and 8 vCPU unless raised [DLC-CREATE].
DLC_PUBLIC_MAX_GPUS = 2
DLC_PUBLIC_MAX_VCPU = 8
#: GPUs per pod on a quota (one 8-GPU node per pod is the Lingjun/general-computing norm).
QUOTA_GPUS_PER_POD = 8
DEFAULT_QUOTA_GPU = "A100-80G"


def dlc_image(profile) -> tuple[str, bool, list[str]]:
    """The job image: the profile's, else the PAI PyTorch training image path of the region."""
    if profile.job.image:
        return profile.job.image, False, []
    repo = f"dsw-registry-vpc.{profile.region}.cr.aliyuncs.com/pai/pytorch-training"
    if profile.dlc.image_tag:
        return f"{repo}:{profile.dlc.image_tag}", True, [f"DLC image {repo}:{profile.dlc.image_tag} (tag pinned by dlc.image_tag)"]
    return repo, True, [f"DLC image {repo} has no tag: set dlc.image_tag to a tag that "
                        "AIWorkspace ListImages(labels=system.supported.dlc=true) lists (no tag is invented)"]


def resolve_dlc(profile, catalog: Catalog, ecs_res=None):
    from .resolver import Resolution, _evaluate, _sort_key, _static_rejection, _zone_for

    t, r = profile.training, profile.resources
    labels = ["DLC cost unknown offline: PAI-DLC prices are not in the catalog"]
    quota = profile.dlc.resource_id
    cands: list[Candidate] = []
    if quota:
        gpu = catalog.gpu(r.gpu_models[0]) if r.gpu_models else catalog.gpu(DEFAULT_QUOTA_GPU)
        if not r.gpu_models:
            labels.append(f"quota GPU model unknown offline: sized for {gpu.name}; set resources.gpu_models")
        total = r.gpus if isinstance(r.gpus, int) else _smallest_fit(profile, gpu.usable_gib, 64)
        if total is None:
            raise InfeasibleError(f"{profile.name}: does not fit {gpu.name} GPUs on the quota even with 64 GPUs",
                                  suggestions=["enable gradient checkpointing", "use LoRA/QLoRA", "zero_stage: 3"])
        per_pod = min(total, QUOTA_GPUS_PER_POD)
        pods = math.ceil(total / per_pod)
        inst = None
        chosen = Candidate(target="dlc", instance_type=None, gpu_model=gpu.name, nodes=pods, gpus_per_node=per_pod,
                           labels=tuple(labels))
        rdma = profile.dlc.enable_rdma if profile.dlc.enable_rdma is not None else pods > 1
    else:
        for inst in catalog.resolved_instances():
            if _static_rejection(profile, inst):
                continue
            pods_options = [r.gpus // inst.gpu_count] if isinstance(r.gpus, int) and r.gpus % inst.gpu_count == 0 \
                else ([] if isinstance(r.gpus, int) else [1, 2])
            limits = not profile.dlc.public_limits_raised
            for pods in pods_options:
                if pods < 1:
                    continue
                if limits and (pods * inst.gpu_count > DLC_PUBLIC_MAX_GPUS
                               or pods * (inst.type.vcpu or DLC_PUBLIC_MAX_VCPU + 1) > DLC_PUBLIC_MAX_VCPU):
                    continue
                if pods > 1 and inst.rdma not in ("erdma", "roce"):
                    continue  # several pods train together only over RDMA
                zone, _, _ = _zone_for(profile, catalog, inst)
                ev = _evaluate(profile, catalog, inst, pods, False, zone, ())
                c = ev.cand
                if c.feasible or (c.reason or "").startswith(("costs", "price unknown")):
                    cands.append(c.model_copy(update={"target": "dlc", "feasible": True, "reason": None,
                                                       "hourly_cost_cny": None, "total_cost_cny": None,
                                                       "objective": c.hourly_cost_cny}))
        if not cands:
            raise InfeasibleError(
                f"{profile.name}: no PAI-DLC public-resource spec fits (at most {DLC_PUBLIC_MAX_GPUS} GPUs and "
                f"{DLC_PUBLIC_MAX_VCPU} vCPU unless your account manager raises them)",
                suggestions=["use a DLC resource quota (dlc.resource_id)", "use ECS (resources.target: ecs)",
                             "if your account manager raised the limits: dlc.public_limits_raised: true"]
                + ([] if t.method == "qlora" else [f"train {'QLoRA' if t.method == 'lora' else 'LoRA/QLoRA'} adapters "
                                                   "to fit fewer, smaller GPUs"])
                + ([] if t.gradient_checkpointing else ["enable gradient checkpointing"]))
        cands.sort(key=lambda c: _sort_key(c, "cost"))
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
    mem = sizing.memory_estimate(profile.architecture, t, gpus)
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
        ecs_ok = sorted((c for c in ecs_res.candidates if c.feasible), key=lambda c: _sort_key(c, r.objective))
        if ecs_ok:
            e = ecs_ok[0]
            labels.append(f"ECS alternative {e.nodes} x {e.instance_type} costs "
                          f"{e.total_cost_cny or e.hourly_cost_cny} CNY (known); DLC was chosen because the "
                          "profile names a PAI workspace or quota, not on price")
            alternatives = tuple(ecs_ok[:5]) + alternatives
    max_minutes = int(profile.job.max_runtime_hours * 60) if profile.job.max_runtime_hours else (
        int(r.deadline_hours * 60) if r.deadline_hours else None)
    ref_inst = inst
    storage = plan_storage(profile, ref_inst, chosen.nodes, spot, mem.trainable_params) if ref_inst else None
    if storage is None:
        from .layout import bucket_name
        from .plan import OssPlan, StoragePlan

        storage = StoragePlan(checkpoint="oss", checkpoint_path="/mnt/data/checkpoints",
                              oss=OssPlan(bucket=bucket_name(profile),
                                          internal_endpoint=f"oss-{profile.region}-internal.aliyuncs.com"),
                              dataset_uri=profile.storage.dataset_uri, dataset_gib=profile.storage.dataset_gib,
                              retain_on_destroy=profile.storage.retain_on_destroy)
    storage = storage.model_copy(update={"data_disk": None})
    dlc = DlcPlan(workspace_id=profile.dlc.workspace_id, resource_id=quota, job_type=profile.dlc.job_type,
                  image=image, image_is_default=is_default, ecs_spec=None if quota else chosen.instance_type,
                  pod_count=chosen.nodes, gpus_per_pod=chosen.gpus_per_node,
                  cpu_per_pod=(inst.type.vcpu if inst else None), memory_gib_per_pod=(inst.type.memory_gib if inst else None),
                  enable_rdma=rdma, spot=spot, spot_price_limit=limit, command=profile.job.command, envs=envs,
                  max_running_minutes=max_minutes)
    thr_tps = chosen.tokens_per_second
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
                                 tokens_per_second=thr_tps, estimated_hours=chosen.estimated_hours),
        storage=storage, network=plan_network(profile, None, chosen.nodes, spot), image=plan_image(profile, None),
        job=JobPlan(command=profile.job.command, code_uri=profile.job.code_uri, env=dict(profile.job.env),
                    max_runtime_hours=profile.job.max_runtime_hours, nproc_per_node=chosen.gpus_per_node,
                    method=t.method, precision=t.precision, zero_stage=t.zero_stage,
                    gradient_checkpointing=t.gradient_checkpointing, micro_batch_size=t.micro_batch_size,
                    sequence_length=t.sequence_length),
        dlc=dlc, tags=dict(profile.tags), labels=tuple(dict.fromkeys(labels)),
        reasons=(f"PAI-DLC: {'quota ' + quota if quota else 'public resources'}, {chosen.nodes} pod(s) x "
                 f"{chosen.gpus_per_node} {gpu_model.name}",),
        alternatives=alternatives, rejected=tuple(ecs_res.rejected) if ecs_res else (),
        catalog_date=catalog.newest_price_date)
    return Resolution(plan=plan, candidates=cands, rejected=list(plan.rejected))


def _smallest_fit(profile, usable_gib: float, limit: int) -> Optional[int]:
    n = 1
    while n <= limit:
        if sizing.memory_estimate(profile.architecture, profile.training, n).required_gib_per_gpu <= usable_gib:
            return n
        n *= 2
    return None
