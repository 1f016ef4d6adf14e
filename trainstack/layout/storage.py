"""Storage around a placement: the node's data disk, CPFS, the OSS checkpoint bucket.

Pure rules over the profile and the chosen instance, each documented, so the same inputs always
give the same layout.
"""

from __future__ import annotations

import hashlib
import math
from typing import Optional

from ..architecture import Architecture
from ..catalog.limits import service_limits
from ..catalog.models import ResolvedInstance
from ..plan import ESSD_MAX_GIB, ESSD_MIN_GIB, CpfsPlan, DataDiskPlan, OssPlan, StoragePlan
from ..profile import TrainingProfile

GIB = 2**30
#: Checkpoints kept on shared storage (latest + previous), so a torn write never loses both.
CHECKPOINTS_KEPT = 2
#: CPFS general-purpose scales in steps; its minimum is unverified (data/service_limits.yaml).
CPFS_STEP_GIB = int(service_limits().number("cpfs.capacity.step_gib"))
CPFS_MIN_GIB = int(service_limits().number("cpfs.capacity.min_gib"))
SYSTEM_DISK_GIB = 200  # image + driver + CUDA + Python environments
SCRATCH_GIB = 100


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


def oss_plan(profile: TrainingProfile) -> OssPlan:
    """The stack's bucket: checkpoints (``checkpoints/``) when they go to OSS, and on every ECS plan the
    nodes' heartbeats (``status/``, docs/status.md)."""
    return OssPlan(bucket=bucket_name(profile), internal_endpoint=f"oss-{profile.region}-internal.aliyuncs.com")


def plan_storage(profile: TrainingProfile, inst: ResolvedInstance, nodes: int, spot: bool,
                 trainable_params: Optional[int], stack_bucket_always: bool = True) -> StoragePlan:
    """Disks, CPFS and the bucket. ``stack_bucket_always``: every ECS plan gets the bucket, also with
    checkpoints on ESSD or CPFS, so its nodes have a place for their heartbeats; a DLC job only for
    OSS checkpoints (its status comes from the DLC API, and a new data source would replace a
    running job)."""
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
        oss = oss_plan(profile)
        path = "/mnt/checkpoints"
    if oss is None and stack_bucket_always:
        oss = oss_plan(profile)
    if spot and s.checkpoint != "essd":
        notes.append(f"spot: checkpoints go to {s.checkpoint} ({path}), which outlives any instance")
    return StoragePlan(
        system_disk_gib=SYSTEM_DISK_GIB, data_disk=disk, cpfs=cpfs, oss=oss, checkpoint=s.checkpoint,
        checkpoint_path=path, dataset_uri=s.dataset_uri, dataset_gib=s.dataset_gib,
        retain_on_destroy=s.retain_on_destroy, notes=tuple(notes))
