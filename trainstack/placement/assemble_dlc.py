"""The PAI-DLC parts of a Plan (trainstack.placement.assemble): pricing and spot, the job's image, RDMA
and NCCL environment, pod resources, storage (the OSS checkpoint bucket) and the labels.

RDMA is decided here once: on a Lingjun quota always (PAI's RDMA network), else ``dlc.enable_rdma``
as stated, else on for several pods. The engine never lets several pods through with RDMA turned off
(``engine.dlc_rdma_reason``), so a multi-pod plan always has it and ``multi-node-requires-rdma`` agrees.
"""

from __future__ import annotations

from typing import Any, Optional

from ..catalog import Catalog, dlc_facts
from ..layout import ERDMA_NCCL_ENV, plan_image, plan_network
from ..plan import DlcPlan, StoragePlan, spot_price_limit
from ..profile import TrainingProfile
from .assembly import Choice, Collector, layout_reasons
from .cost import candidate_storage
from .dlc_pods import dlc_image, pod_resources
from .layouts import LayoutPick


def dlc_rdma(profile: TrainingProfile, kind: Optional[str], pods: int) -> bool:
    """Whether the job asks PAI for RDMA: Lingjun always, else the profile's word, else for several pods."""
    if kind == "lingjun":
        return True
    return profile.dlc.enable_rdma if profile.dlc.enable_rdma is not None else pods > 1


def dlc_parts(profile: TrainingProfile, catalog: Catalog, choice: Choice, pick: LayoutPick, mem,
              collect: Collector) -> Optional[dict[str, Any]]:
    r, best, quote, node = profile.resources, choice.best, choice.quote, choice.quota
    quota = profile.dlc.resource_id
    labels = list(choice.labels) + [lab for lab in best.labels if lab not in choice.labels]
    gpu = catalog.gpu(best.gpu_model or "")
    image = collect.run(lambda: dlc_image(profile, gpu), "dlc.job_type")
    labels += image[3] if image is not None else []
    spot = r.spot == "require" and not quota
    if r.spot == "require" and quota:
        labels.append("resources.spot: require does not apply to a quota job (a subscription): planned on the quota")
    limit = None
    if spot:
        od = quote.on_demand_cny_per_hour or catalog.quote(profile.region, choice.inst.name).on_demand_cny_per_hour
        limit = spot_price_limit(od) if od else None
        if od and quote.on_demand_cny_per_hour is None:
            labels.append("DLC spot price limit = the ECS on-demand list price of the spec (no DLC price known)")
    kind = node.kind if node is not None else None
    rdma, envs, preset = dlc_rdma(profile, kind, best.nodes), dict(profile.job.env), None
    if kind == "lingjun":
        preset = dlc_facts().spec(node.spec or "").nccl_preset  # type: ignore[union-attr]
        vals = dlc_facts().preset(preset or "lingjun-default").env
        labels.append(f"Lingjun quota: RDMA on, PAI's NCCL preset left alone "
                      f"({', '.join(f'{k}={v}' for k, v in list(vals.items())[:3])}"
                      ", ...) [PAI-RDMA]; trainstack adds no NCCL variables")
    elif rdma and best.nodes > 1 and choice.inst.rdma == "erdma" and kind != "unknown":
        envs = {**ERDMA_NCCL_ENV, **envs}
        labels.append("NCCL over eRDMA as PAI-DLC configures it on eRDMA types [PAI-ERDMA]")
    elif rdma and kind == "unknown":
        labels.append("quota network unknown offline: trainstack adds no NCCL variables (PAI presets them for "
                      "the quota's RDMA network); set dlc.quota_spec to plan it")
    cpu, memory = choice.inst.type.vcpu, choice.inst.type.memory_gib
    if quota and node is not None:
        cpu, memory, pod_labels = pod_resources(profile, node, best.gpus_per_node)
        labels += pod_labels
    if choice.comparison:
        labels.append(choice.comparison)
    storage = collect.run(lambda: dlc_storage(profile, choice, mem), "storage")
    if image is None or storage is None:
        return None
    image_ref, lookup, is_default, _ = image
    j = profile.job
    max_minutes = int(j.max_runtime_hours * 60) if j.max_runtime_hours else (
        int(r.deadline_hours * 60) if r.deadline_hours else None)
    dlc = DlcPlan(workspace_id=profile.dlc.workspace_id, resource_id=quota, job_type=profile.dlc.job_type,
                  image=image_ref, image_lookup=lookup, image_is_default=is_default,
                  quota_spec=node.spec if node else None, quota_kind=kind, nccl_preset=preset,
                  ecs_spec=None if quota else best.instance_type,
                  pod_count=best.nodes, gpus_per_pod=best.gpus_per_node, cpu_per_pod=cpu,
                  memory_gib_per_pod=memory, enable_rdma=bool(rdma), spot=spot, spot_price_limit=limit,
                  command=j.command, envs=envs, max_running_minutes=max_minutes)
    where = f"{'quota ' + quota if quota else 'public resources'}, {best.nodes} pod(s) x {best.gpus_per_node} {gpu.name}"
    return {
        "gpu": gpu, "zone": profile.zone, "instance_type": None if quota else best.instance_type, "spot": spot,
        "spot_price_limit": limit, "storage": storage, "network": plan_network(profile, None, best.nodes, spot), "image": plan_image(profile, None),
        "dlc": dlc, "labels": tuple(dict.fromkeys(labels)),
        "reasons": (f"PAI-DLC: {where}", *layout_reasons(profile, pick, f"{best.nodes} pod(s) x {best.gpus_per_node} "
                                                                          f"{gpu.name}")),
    }


def dlc_storage(profile: TrainingProfile, choice: Choice, mem) -> StoragePlan:
    """The job's storage (``cost.candidate_storage``, which the engine priced): a quota job checkpoints
    to the OSS bucket; a public-resources job as the profile says. No disks: PAI gives the pods their own."""
    return candidate_storage(profile, "dlc", choice.inst, choice.best.nodes, profile.resources.spot == "require",
                             mem.trainable_params)
