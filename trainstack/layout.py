"""Storage, network and image layout of a chosen placement: pure rules, each documented.

The resolver picks *where* a job runs; these functions decide *what surrounds it* (disks,
file systems, buckets, RDMA settings, image family). They read only the profile, the chosen
instance and the catalog facts, so the same inputs always give the same layout.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
from typing import Optional

from .architecture import Architecture
from .catalog.models import ResolvedInstance
from .errors import InputError
from .plan import (
    Plan,
    DEPLOYMENT_SET_MAX, ESSD_MAX_GIB, ESSD_MIN_GIB, CpfsPlan, DataDiskPlan, ImagePlan, NetworkPlan, OssPlan,
    SpotPoolPlan, StoragePlan, ess_price_limit,
)
from .profile import TrainingProfile

GIB = 2**30
#: Checkpoints kept on shared storage (latest + previous), so a torn write never loses both.
CHECKPOINTS_KEPT = 2
#: CPFS general-purpose scales in 1,200 GiB steps [CPFS-SCALE]; 3,600 GiB is the smallest
#: capacity seen in Alibaba's own examples (the documented minimum is unverified).
CPFS_STEP_GIB = 1200
CPFS_MIN_GIB = 3600
SYSTEM_DISK_GIB = 200  # image + driver + CUDA + Python environments
SCRATCH_GIB = 100

#: NCCL over eRDMA as PAI-DLC configures it on eRDMA types [PAI-ERDMA].
ERDMA_NCCL_ENV = {
    "NCCL_IB_HCA": "erdma",
    "NCCL_IB_GID_INDEX": "1",
    "NCCL_IB_QPS_PER_CONNECTION": "8",
    "NCCL_MIN_NCHANNELS": "16",
    "NCCL_NET_PLUGIN": "none",
    "NCCL_SOCKET_IFNAME": "eth0",
}

IMAGE_FAMILY = "acs:alibaba_cloud_linux_3_2104_lts_x64"
IMAGE_FAMILY_UEFI = "acs:alibaba_cloud_linux_3_2104_lts_x64_uefi"


def checkpoint_gib(arch: Architecture, method: str, trainable_params: Optional[int] = None) -> float:
    """Size of the checkpoints kept: bf16 weights (+ fp32 Adam states for full training)."""
    params = arch.params
    if method in ("lora", "qlora"):
        adapters = trainable_params or params * 0.01
        one = adapters * (2 + 8)  # adapter weights + their optimizer states
    else:
        one = params * 2 + params * 12  # bf16 weights + fp32 master and two Adam moments
    return CHECKPOINTS_KEPT * one / GIB


def bucket_name(profile: TrainingProfile) -> str:
    """A DNS-safe, globally-unique-enough OSS bucket name that stays stable across runs."""
    digest = hashlib.sha256(f"{profile.name}/{profile.region}".encode()).hexdigest()[:6]
    return f"{profile.name[:48]}-ckpt-{digest}"


def essd_for(size_gib: float) -> DataDiskPlan:
    """The cheapest ESSD level whose documented minimum the size meets, bigger = faster.

    Throughput grows with size (min{120 + 0.5 x C, cap} MB/s); PL3 needs >= 1,261 GiB and PL2
    >= 461 GiB [ESSD-DOC], so the level follows the size and never the other way round.
    """
    size = min(int(math.ceil(max(size_gib, ESSD_MIN_GIB["PL1"]))), ESSD_MAX_GIB)
    level = "PL3" if size >= ESSD_MIN_GIB["PL3"] else "PL2" if size >= ESSD_MIN_GIB["PL2"] else "PL1"
    return DataDiskPlan(performance_level=level, size_gib=size)


def plan_storage(profile: TrainingProfile, inst: ResolvedInstance, nodes: int, spot: bool,
                 trainable_params: Optional[int]) -> StoragePlan:
    s = profile.storage
    notes: list[str] = []
    ckpt_gib = s.checkpoint_gib or checkpoint_gib(profile.architecture, profile.training.method, trainable_params)
    local_gib = s.dataset_gib * 1.2 + SCRATCH_GIB + (ckpt_gib if s.checkpoint == "essd" else 0)
    disk = essd_for(local_gib)
    if local_gib > ESSD_MAX_GIB:
        notes.append(f"{local_gib:,.0f} GiB of local data exceeds the largest ESSD ({ESSD_MAX_GIB:,} GiB): the disk is a "
                     "cache; stream the dataset from storage.dataset_uri (OSS or CPFS)")
    cpfs = oss = None
    if s.checkpoint == "essd":
        path = f"{disk.mount_path}/checkpoints"
        # a disk holding checkpoints always outlives its instance (a standalone, retained EcsDisk)
        disk = disk.model_copy(update={"holds_checkpoints": True, "delete_with_instance": False})
        if spot:
            notes.append("spot: the checkpoint disk is kept when an instance is reclaimed; re-attach it to the "
                         "replacement node")
        if nodes > 1:
            notes.append("checkpoints on ESSD are per node; multi-node jobs should use cpfs or oss")
    elif s.checkpoint == "cpfs":
        need = (ckpt_gib + s.dataset_gib) * 1.2
        cap = max(CPFS_MIN_GIB, int(math.ceil(need / CPFS_STEP_GIB)) * CPFS_STEP_GIB)
        tier = "advance_200" if nodes > 1 else "advance_100"
        mbps_per_tib = 200 if tier == "advance_200" else 100
        cpfs = CpfsPlan(capacity_gib=cap, storage_type=tier, throughput_mbps=mbps_per_tib * cap / 1024)
        path = f"{cpfs.mount_path}/checkpoints"
    else:
        oss = OssPlan(bucket=bucket_name(profile),
                      internal_endpoint=f"oss-{profile.region}-internal.aliyuncs.com")
        path = "/mnt/checkpoints"
    if spot and s.checkpoint != "essd":
        notes.append(f"spot: checkpoints go to {s.checkpoint} ({path}), which outlives any instance")
    return StoragePlan(
        system_disk_gib=SYSTEM_DISK_GIB, data_disk=disk, cpfs=cpfs, oss=oss, checkpoint=s.checkpoint,
        checkpoint_path=path, dataset_uri=s.dataset_uri, dataset_gib=s.dataset_gib,
        retain_on_destroy=s.retain_on_destroy, notes=tuple(notes))


def default_vswitch_cidr(vpc_cidr: str) -> str:
    """The first /20 of the VPC (4,091 usable hosts), or the whole VPC when it is smaller."""
    net = ipaddress.ip_network(vpc_cidr)
    return str(next(net.subnets(new_prefix=20))) if net.prefixlen < 20 else str(net)


def plan_network(profile: TrainingProfile, inst: Optional[ResolvedInstance], nodes: int, spot: bool) -> NetworkPlan:
    n = profile.network
    notes: list[str] = []
    rdma, eri, mtu, env = "none", 0, 1500, {}
    dset, groups = None, 0
    if inst is not None and nodes > 1:
        rdma = inst.rdma if inst.rdma in ("erdma", "roce") else "none"
        if rdma == "erdma":
            eri = max(1, inst.type.eri_count or 1)
            mtu = 8500
            env = dict(ERDMA_NCCL_ENV)
            notes.append("eRDMA with jumbo frames (MTU 8500) as Alibaba advises for NCCL LL128 [ERDMA-GPU]")
        elif rdma == "roce":
            env = {"NCCL_SOCKET_IFNAME": "eth0"}
            notes.append("RoCE NCCL device names are not in the catalog (unverified): NCCL autodetects them")
        if spot:
            notes.append("no deployment set: Alibaba does not allow spot instances in a deployment set")
        elif inst.family.deployment_set_low_latency:
            dset, groups = "LowLatency", math.ceil(nodes / DEPLOYMENT_SET_MAX)
            if groups > 1:
                notes.append(f"{nodes} nodes exceed the {DEPLOYMENT_SET_MAX}-instance limit of a deployment "
                             f"set: split into {groups} LowLatency sets")
        else:
            notes.append(f"no deployment set: LowLatency support of family {inst.family.name} is unverified "
                         "offline; nodes share one zone and vSwitch")
    return NetworkPlan(
        vpc_cidr=n.vpc_cidr, vswitch_cidr=n.vswitch_cidr or default_vswitch_cidr(n.vpc_cidr), rdma=rdma,
        eri_per_node=eri, deployment_set=dset, deployment_set_groups=groups, mtu=mtu,
        internet_egress=n.internet_egress, ssh_cidrs=tuple(profile.access.ssh_cidrs),
        key_pair=profile.access.key_pair, nccl_env=env, notes=tuple(notes))


def plan_image(profile: TrainingProfile, inst: Optional[ResolvedInstance]) -> ImagePlan:
    uefi = bool(inst and inst.family.uefi_required)
    notes = []
    if profile.image_id:
        notes.append(f"image pinned by the profile: {profile.image_id}")
    else:
        notes.append("image looked up by family at deploy time (newest system image of the family)")
    if uefi:
        notes.append(f"family {inst.family.name} requires a UEFI boot image")  # type: ignore[union-attr]
    return ImagePlan(image_id=profile.image_id, image_family=IMAGE_FAMILY_UEFI if uefi else IMAGE_FAMILY,
                     uefi=uefi, container_image=profile.job.image, notes=tuple(notes))


def plan_spot_pool(profile: TrainingProfile, nodes: int, spot: bool,
                   price_limit: Optional[float]) -> tuple[Optional[SpotPoolPlan], list[str]]:
    """The self-healing spot pool (``resources.self_healing``) and the labels that explain it.

    Applied only to a 1-node spot plan: ESS gives a replacement node a new private IP, and a
    multi-node torchrun cluster is rendered with fixed IPs (hostfile, MASTER_ADDR), so for several
    nodes plain instances stay and a label says why. The pool keeps exactly one node (min = max =
    desired = 1), all spot (on-demand base 0: a base of 1 in a 1-node pool would mean no spot);
    with ``spot: allow`` ESS may start an on-demand node while no spot node can be had, with
    ``spot: require`` it never does. Checkpoints are on OSS or CPFS (the profile validator refuses
    ESSD), and the bootstrap restores the latest one, so a replacement node resumes.
    """
    if not profile.resources.self_healing:
        return None, []
    if not spot:
        return None, ["self-healing not applied: the chosen plan is on-demand (nothing to replace on reclaim)"]
    if nodes > 1:
        return None, [f"self-healing not applied: {nodes} nodes form a torchrun cluster with fixed private IPs; "
                      "a replacement node would get a new IP, so plain spot instances are used"]
    if price_limit is None:
        return None, ["self-healing not applied: the spot plan has no price limit"]
    compensate = profile.resources.spot == "allow"
    limit = ess_price_limit(price_limit)
    notes = [f"self-healing: an ESS scaling group keeps 1 spot node running and replaces it when reclaimed "
             f"(spot price limit {limit} CNY/h)",
             "self-healing: the node is not stopped when the job ends (ESS would replace it); run "
             "`pulumi destroy --exclude-protected` to stop paying"]
    if compensate:
        notes.append("self-healing: with spot: allow, ESS starts an on-demand node while no spot node can be had "
                     "(on-demand price)")
    return SpotPoolPlan(compensate_with_on_demand=compensate, price_limit=limit, notes=tuple(notes)), notes


def deployment_set_layout(plan: Plan) -> list[int]:
    """Deployment-set group of each node ([] = none). Groups hold at most DEPLOYMENT_SET_MAX
    instances; nodes are split into contiguous, balanced groups."""
    net = plan.network
    if net.deployment_set != "LowLatency" or plan.nodes < 2:
        return []
    if plan.spot or plan.spot_strategy != "NoSpot":
        return []  # a deployment set cannot hold spot instances (facts §I)
    groups = max(net.deployment_set_groups, math.ceil(plan.nodes / DEPLOYMENT_SET_MAX))
    layout = [i * groups // plan.nodes for i in range(plan.nodes)]
    if max(layout.count(g) for g in range(groups)) > DEPLOYMENT_SET_MAX:
        raise InputError(f"{plan.nodes} nodes do not fit {groups} deployment set(s) of {DEPLOYMENT_SET_MAX}")
    return layout
