"""What a PAI-DLC job's pods run: their image, the quota's node, and each pod's share of it.

The DLC strategy (``dlc.py``) sizes and ranks pods on these; a profile's image and ``dlc.quota_spec``
are checked here (``image_problem``, ``quota_spec_problems``), and the rule book reports the same
problems (trainstack.rules.dlc_profile), a layer above. The image is ``job.image``, else
``dlc.image_tag`` on PAI's repository, else PAI's official image looked up at deploy time
(``ImageLookup``). A quota's node is the ECS type ``dlc.quota_spec`` names, a Lingjun spec whose GPU
the team states in the catalog overlay, or one assumed for ``resources.gpu_models`` (labelled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Optional

from ..catalog import Catalog, GpuModel, InstanceFamily, InstanceType, ResolvedInstance, dlc_facts
from ..catalog.dlc_specs import LINGJUN_OVERLAY
from ..catalog.loader import overlay_dir
from ..errors import InputError, Problem, did_you_mean
from ..plan import ImageLookup
from ..profile import TrainingProfile
from .engine import can_span_nodes

#: The GPU a quota of unstated spec is sized for when resources.gpu_models names none.
DEFAULT_QUOTA_GPU = "A100-80G"
#: GPUs per node assumed for a quota whose node no catalog type describes.
ASSUMED_GPUS_PER_NODE = 8


# ---- the image -----------------------------------------------------------------------------------

def image_problem(profile: TrainingProfile) -> Optional[Problem]:
    """A DLC job that pins no image and whose job type has no official image to look up."""
    if profile.job.image or profile.dlc.image_tag:
        return None
    if profile.dlc.job_type in dlc_facts().official_images.frameworks:
        return None
    return Problem(path="dlc.job_type", given=profile.dlc.job_type, has_given=True,
                   message=f"no official image is looked up for {profile.dlc.job_type} jobs (only "
                           f"{', '.join(dlc_facts().official_images.frameworks)}); set job.image, or dlc.image_tag")


def quota_spec_problems(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """``dlc.quota_spec`` must be a catalog ECS type or a Lingjun spec whose GPU the team stated."""
    spec = profile.dlc.quota_spec
    if spec is None:
        return []
    if catalog.knows(spec):
        return []
    facts = dlc_facts()
    lingjun = {s.name: s for s in facts.lingjun_specs}
    if spec not in lingjun:
        pool = list(lingjun) + [r.name for r in catalog.resolved_instances()]
        return [Problem(path="dlc.quota_spec", given=spec, has_given=True, suggestions=did_you_mean(spec, pool),
                        message="not an ECS type of the catalog or a Lingjun spec PAI documents")]
    if lingjun[spec].stated is None:
        return [Problem(path="dlc.quota_spec", given=spec, has_given=True,
                        message=f"Alibaba documents no GPU model, GPU count or interconnect for Lingjun spec {spec} "
                                f"[PAI-RDMA]: state them (from ListEcsSpecs or the console) in "
                                f"{overlay_dir() / LINGJUN_OVERLAY} (docs/dlc.md, \"Lingjun\")")]
    return []


def dlc_image(profile: TrainingProfile, gpu: GpuModel) -> tuple[Optional[str], Optional[ImageLookup], bool, list[str]]:
    """(image, lookup, is PAI's official image, labels): the profile's image, a pinned tag of PAI's
    repository, or PAI's official training image looked up at deploy time (never an invented tag)."""
    if profile.job.image:
        return profile.job.image, None, False, []
    official = dlc_facts().official_images
    framework = official.frameworks.get(profile.dlc.job_type, "pytorch")
    repo = f"dsw-registry-vpc.{profile.region}.cr.aliyuncs.com/pai/{framework}{official.repository_suffix}"
    if profile.dlc.image_tag:
        return f"{repo}:{profile.dlc.image_tag}", None, True, [f"DLC image {repo}:{profile.dlc.image_tag} "
                                                               "(tag pinned by dlc.image_tag)"]
    problem = image_problem(profile)
    if problem is not None:
        raise InputError(problem.message, problems=[problem])
    min_cuda = official.min_cuda_by_architecture.get(gpu.architecture, "11.8")
    lookup = ImageLookup(labels=official.label_filter, name=official.name_filter, repository=f"{framework}"
                         f"{official.repository_suffix}", min_cuda=min_cuda, architecture=gpu.architecture)
    return None, lookup, True, [
        f"DLC image resolved at deploy time: the newest official PAI {lookup.repository} GPU image with CUDA >= "
        f"{min_cuda} ({gpu.architecture}), from AIWorkspace ListImages (labels {','.join(lookup.labels)}); the "
        "job keeps the image it was submitted with; pin dlc.image_tag or job.image to choose it yourself"]


# ---- the quota's node ----------------------------------------------------------------------------

@dataclass
class QuotaNode:
    """The node a quota's pods run on, as the engine sees it."""

    inst: ResolvedInstance
    kind: str  # lingjun | general | unknown
    spec: Optional[str]
    labels: list[str] = field(default_factory=list)


def quota_node(profile: TrainingProfile, catalog: Catalog) -> QuotaNode:
    """The quota's node: the named ECS type, the stated Lingjun spec, or one assumed for the GPU."""
    spec = profile.dlc.quota_spec
    if spec is not None:
        problems = quota_spec_problems(profile, catalog)
        if problems:
            raise InputError(problems[0].message, problems=problems)
        if catalog.knows(spec):
            return QuotaNode(catalog.instance(spec), "general", spec,
                             [f"quota nodes are {spec} (dlc.quota_spec); the quota's real spec is read at deploy time"])
        return lingjun_node(dlc_facts().spec(spec), catalog)
    gpu = catalog.gpu(profile.resources.gpu_models[0]) if profile.resources.gpu_models else catalog.gpu(DEFAULT_QUOTA_GPU)
    labels = [f"quota node spec unknown offline: sized for {gpu.name}"
              + ("" if profile.resources.gpu_models else " (resources.gpu_models names none)")
              + "; set dlc.quota_spec to plan its real node; the quota is read at deploy time"]
    ref = reference_node(catalog, gpu)
    if ref is not None:
        labels.append(f"quota node assumed like {ref.name} ({ref.gpu_count} x {gpu.name}, {ref.interconnect}, "
                      f"{ref.rdma})")
        return QuotaNode(ref, "unknown", None, labels)
    labels.append(f"quota node assumed: {ASSUMED_GPUS_PER_NODE} x {gpu.name} on NVLink with eRDMA (no catalog type "
                  f"carries {gpu.name})")
    fam = InstanceFamily(name=f"quota-{gpu.name.lower()}", gpu=gpu.name, interconnect="nvlink", rdma="erdma",
                         sources=tuple(gpu.sources), unverified=("interconnect", "rdma"))
    typ = InstanceType(name=f"quota-node-{gpu.name.lower()}", family=fam.name, gpu_count=ASSUMED_GPUS_PER_NODE,
                       sources=tuple(gpu.sources), unverified=("vcpu", "memory_gib"))
    return QuotaNode(ResolvedInstance(type=typ, family=fam, gpu=gpu), "unknown", None, labels)


def lingjun_node(spec, catalog: Catalog) -> QuotaNode:
    """A Lingjun node from what PAI documents (RDMA, the NCCL preset) and what the team stated (GPU)."""
    stated = spec.stated
    reading = spec.name_reading
    vcpu = stated.vcpu or (reading.vcpu if reading else None)
    memory = stated.memory_gib or (reading.memory_gib if reading else None)
    labels = [f"Lingjun spec {spec.name}: {stated.gpu_count} x {stated.gpu_model} on {stated.interconnect} as the team "
              f"states it (overlay lingjun_specs.yaml: {stated.source}, {stated.as_of}); PAI documents only its name, "
              "RDMA and NCCL preset [PAI-RDMA]"]
    if (stated.vcpu is None and vcpu) or (stated.memory_gib is None and memory):
        labels.append(f"Lingjun spec {spec.name}: vCPU/memory read from the spec name ({vcpu} vCPU, {memory} GiB), "
                      "not documented")
    fam = InstanceFamily(name=f"lingjun-{spec.name.split('.')[1]}", gpu=stated.gpu_model,
                         interconnect=stated.interconnect, rdma="roce", training=True, sources=tuple(spec.sources),
                         unverified=("gpu", "interconnect"),
                         notes="Lingjun RDMA (mlx5 HCAs) modelled as RoCE for multi-node speed")
    typ = InstanceType(name=spec.name, family=fam.name, gpu_count=stated.gpu_count, vcpu=vcpu, memory_gib=memory,
                       sources=tuple(spec.sources), unverified=("gpu_count", "vcpu", "memory_gib"))
    return QuotaNode(ResolvedInstance(type=typ, family=fam, gpu=catalog.gpu(stated.gpu_model)), "lingjun", spec.name,
                     labels)


def reference_node(catalog: Catalog, gpu: GpuModel) -> Optional[ResolvedInstance]:
    """The catalog's largest trainable node of ``gpu`` (NVLink when several GPUs), RDMA preferred."""
    rows = [r for r in catalog.resolved_instances() if r.trainable and r.gpu is not None and r.gpu.name == gpu.name
            and (r.gpu_count == 1 or r.multi_gpu_training_ok)]
    return max(rows, key=lambda r: (r.gpu_count, "gpu" not in r.family.unverified, can_span_nodes(r),
                                    r.type.vcpu or 0, r.name)) if rows else None


def pod_view(node: ResolvedInstance, gpus: int) -> ResolvedInstance:
    """A pod of ``gpus`` GPUs of ``node`` as the engine sizes it (GPU share of vCPU and memory)."""
    if gpus == node.gpu_count:
        return node
    share = gpus / node.gpu_count
    t = node.type
    typ = t.model_copy(update={
        "gpu_count": gpus, "vcpu": None if t.vcpu is None else max(1, int(t.vcpu * share)),
        "memory_gib": None if t.memory_gib is None else math.floor(t.memory_gib * share),
        "rdma_bandwidth_gbps": t.rdma_bandwidth_gbps, "network_bandwidth_gbps": t.network_bandwidth_gbps})
    return node.model_copy(update={"type": typ})


def pod_resources(profile: TrainingProfile, node: QuotaNode, gpus_per_pod: int) -> tuple[Optional[int], Optional[float], list[str]]:
    """(vCPU, memory GiB, labels) per pod: the profile's, else the GPU share of the quota's node."""
    d = profile.dlc
    share = pod_view(node.inst, gpus_per_pod).type
    cpu = d.cpu_per_pod if d.cpu_per_pod is not None else share.vcpu
    memory = d.memory_gib_per_pod if d.memory_gib_per_pod is not None else share.memory_gib
    labels = []
    if d.cpu_per_pod is None or d.memory_gib_per_pod is None:
        what = " and ".join(k for k, v in (("CPU", d.cpu_per_pod), ("memory", d.memory_gib_per_pod)) if v is None)
        labels.append(f"pod {what} default: the GPU share ({gpus_per_pod}/{node.inst.gpu_count}) of {node.inst.name} "
                      f"= {cpu if cpu is not None else '?'} vCPU, {memory if memory is not None else '?'} GiB; PAI keeps "
                      "some of each node for itself, so set dlc.cpu_per_pod / dlc.memory_gib_per_pod if pods do not "
                      "schedule")
    return cpu, memory, labels
