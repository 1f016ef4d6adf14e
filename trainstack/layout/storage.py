"""Storage around a placement: the node's data and checkpoint disks, CPFS, the stack bucket.

Pure rules over the profile and the chosen instance, each documented, so the same inputs always
give the same layout.

The stack bucket: every ECS plan has one OSS bucket (also when checkpoints are on CPFS or ESSD),
with these prefixes (:data:`BUCKET_PREFIXES`), which the node role's policy grants separately:

* ``job/``: the job settings channel (``job/settings.json``, written by ``pulumi up`` as a managed
  object; nodes may only read it; trainstack.bootstrap.settings);
* ``status/``: node status and heartbeats, written by the nodes (the status command reads them);
* ``checkpoints/``: checkpoints when ``storage.checkpoint`` is oss (read/write for the nodes).

Its name is ``<profile name>-<10 hex>``, the hex a digest of the account, the Pulumi project and
stack, the region and ``trainstack:storageGeneration`` (:func:`stack_bucket_name`), filled in at
deploy time: two teams deploying the same sample profile never collide, and a redeploy next to a
bucket retained by an earlier ``pulumi destroy`` takes a new generation.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from typing import Optional

from ..architecture import Architecture
from ..catalog.limits import service_limits
from ..catalog.models import ResolvedInstance
from ..plan import ESSD_MAX_GIB, ESSD_MIN_GIB, CpfsPlan, DataDiskPlan, OssPlan, Plan, StoragePlan
from ..profile import TrainingProfile

GIB = 2**30
#: Checkpoints kept on shared storage (latest + previous), so a torn write never loses both.
CHECKPOINTS_KEPT = 2
#: CPFS general-purpose scales in steps; its minimum is unverified (data/service_limits.yaml).
CPFS_STEP_GIB = int(service_limits().number("cpfs.capacity.step_gib"))
CPFS_MIN_GIB = int(service_limits().number("cpfs.capacity.min_gib"))
SYSTEM_DISK_GIB = 200  # image + driver + CUDA + Python environments
SCRATCH_GIB = 100
MB_PER_GIB = GIB / 1e6
#: OSS states no read throughput per bucket that we could source; one 10 Gbit/s path is our figure
OSS_READ_MBPS = 1250.0


@dataclass(frozen=True)
class DatasetCopy:
    """One node's copy of the dataset at boot (storage.dataset_sync: at-boot), in the background."""

    seconds: float
    mbps: float
    kind: str  # sourced: the data disk's throughput bounds it; assumed: our OSS figure does
    source: str


def dataset_copy(storage: StoragePlan) -> Optional[DatasetCopy]:
    """The dataset's GiB over the slower of the data disk's throughput (ESSD-PERF, by level and size; an
    AutoPL disk as PL1) and OSS's read (assumed). None: the plan copies nothing."""
    disk = storage.data_disk
    if storage.dataset_dir is None or disk is None or not storage.dataset_gib:
        return None
    level = "PL1" if disk.category == "cloud_auto" else disk.performance_level
    limits = service_limits()
    base, per_gib, top = (limits.value(f"ecs.essd.throughput_{k}_mbps") for k in ("base", "per_gib", "max"))
    assert isinstance(base, dict) and isinstance(per_gib, dict) and isinstance(top, dict)
    essd = min(float(base[level]) + float(per_gib[level]) * disk.size_gib, float(top[level]))
    if essd <= OSS_READ_MBPS:
        mbps, kind = essd, "sourced"
        source = (f"ESSD-PERF: a {disk.size_gib:,} GiB {level} disk writes min{{{base[level]} + {per_gib[level]} x "
                  f"{disk.size_gib:,}, {top[level]}}} = {essd:,.0f} MB/s; the instance type's own disk bandwidth "
                  "cap is not modelled")
    else:
        mbps, kind = OSS_READ_MBPS, "assumed"
        source = f"OSS read at {OSS_READ_MBPS:,.0f} MB/s (no per-bucket figure found; the disk writes {essd:,.0f} MB/s)"
    return DatasetCopy(seconds=round(storage.dataset_gib * MB_PER_GIB / mbps, 1), mbps=mbps, kind=kind, source=source)


def local_data_gib(dataset_gib: float) -> float:
    """What the data disk must hold: the dataset with a fifth to spare, and scratch."""
    return dataset_gib * 1.2 + SCRATCH_GIB


def checkpoint_gib(arch: Architecture, method: str, trainable_params: Optional[int] = None) -> float:
    """Size of the checkpoints kept: bf16 weights (+ fp32 Adam states for full training)."""
    params = arch.params
    if method in ("lora", "qlora"):
        adapters = trainable_params or params * 0.01
        one = adapters * (2 + 8)  # adapter weights + their optimizer states
    else:
        one = params * 2 + params * 12  # bf16 weights + fp32 master and two Adam moments
    return CHECKPOINTS_KEPT * one / GIB


#: The stack bucket's prefixes and who writes them (the node role's OSS policy follows this table).
BUCKET_PREFIXES: dict[str, str] = {
    "job/": "job settings: written by `pulumi up` (a managed object), read-only for the nodes",
    "status/": "node status and heartbeats: written by the nodes",
    "checkpoints/": "checkpoints (storage.checkpoint: oss): read and written by the nodes",
}
BUCKET_NAME_DIGEST_CHARS = 10
_BUCKET_MAX = int(service_limits().number("oss.bucket_name.max_chars"))


@dataclass(frozen=True)
class StackIdentity:
    """Who deploys the stack: the parts that make a bucket name unique per stack. Unknown parts (an
    offline ``trainstack resolve``) are left out; the program fills them in at deploy time."""

    region: str
    account_id: Optional[str] = None
    project: Optional[str] = None
    stack: Optional[str] = None
    generation: int = 1


def stack_bucket_name(name: str, identity: StackIdentity) -> str:
    """``<name>-<digest>``: at most 63 characters, lowercase letters, digits and '-', starting with the
    profile name's letter and ending in a hex digit (oss.bucket_name.pattern)."""
    parts = (identity.account_id or "-", identity.project or "-", identity.stack or "-", identity.region,
             str(identity.generation))
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()[:BUCKET_NAME_DIGEST_CHARS]
    return f"{name[:_BUCKET_MAX - BUCKET_NAME_DIGEST_CHARS - 1]}-{digest}"


def with_stack_bucket(plan: Plan, identity: StackIdentity) -> Plan:
    """The plan with its stack bucket's deploy-time name: the one function the program
    (components/stack.py) and ``trainstack node-files`` derive it with, so every key, URI and policy
    document that names the bucket names the same one."""
    oss = plan.storage.oss
    if oss is None or not oss.name_from_stack:
        return plan
    oss = oss.model_copy(update={"bucket": stack_bucket_name(plan.name, identity)})
    return plan.model_copy(update={"storage": plan.storage.model_copy(update={"oss": oss})})


def bucket_name(profile: TrainingProfile, identity: Optional[StackIdentity] = None) -> str:
    """The stack bucket's name for ``profile`` (before deploy time: without account and stack)."""
    return stack_bucket_name(profile.name, identity or StackIdentity(region=profile.region))


def stack_bucket(profile: TrainingProfile) -> OssPlan:
    """The stack's bucket (prefixes: :data:`BUCKET_PREFIXES`), its name completed at deploy time."""
    return OssPlan(bucket=bucket_name(profile), internal_endpoint=f"oss-{profile.region}-internal.aliyuncs.com")


def essd_for(size_gib: float) -> DataDiskPlan:
    """The cheapest ESSD level whose documented minimum the size meets, bigger = faster.

    Throughput grows with size (min{120 + 0.5 x C, cap} MB/s); PL3 needs >= 1,261 GiB and PL2
    >= 461 GiB [ESSD-DOC], so the level follows the size and never the other way round.
    """
    size = min(int(math.ceil(max(size_gib, ESSD_MIN_GIB["PL1"]))), ESSD_MAX_GIB)
    level = "PL3" if size >= ESSD_MIN_GIB["PL3"] else "PL2" if size >= ESSD_MIN_GIB["PL2"] else "PL1"
    return DataDiskPlan(performance_level=level, size_gib=size)


CHECKPOINT_MOUNT = "/mnt/checkpoints"


def plan_storage(profile: TrainingProfile, inst: ResolvedInstance, nodes: int, spot: bool,
                 trainable_params: Optional[int], stack_bucket_always: bool = True) -> StoragePlan:
    """Disks, CPFS and the bucket. ``stack_bucket_always``: every ECS plan gets the bucket, also with
    checkpoints on ESSD or CPFS: the job settings channel (``job/``) and the nodes' heartbeats
    (``status/``, docs/status.md) live there; a DLC job only for OSS checkpoints (its status comes
    from the DLC API, and a new data source would replace a running job)."""
    s = profile.storage
    notes: list[str] = []
    ckpt_gib = s.checkpoint_gib or checkpoint_gib(profile.architecture, profile.training.method, trainable_params)
    local_gib = local_data_gib(s.dataset_gib)
    disk = essd_for(local_gib)
    if local_gib > ESSD_MAX_GIB:
        notes.append(f"{local_gib:,.0f} GiB of local data exceeds the largest ESSD ({ESSD_MAX_GIB:,} GiB): the disk is a "
                     "cache; stream the dataset from storage.dataset_uri (OSS or CPFS)")
    cpfs = ckpt_disk = None
    oss = stack_bucket(profile) if stack_bucket_always or s.checkpoint == "oss" else None
    if s.checkpoint == "essd":
        path = CHECKPOINT_MOUNT
        # its own disk, apart from the dataset cache: it outlives every instance (standalone, retained)
        ckpt_disk = essd_for(ckpt_gib * 1.2).model_copy(update={
            "holds_checkpoints": True, "mount_path": CHECKPOINT_MOUNT, "label": "trainstack-ckpt"})
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
        path = CHECKPOINT_MOUNT
    if spot and s.checkpoint != "essd":
        notes.append(f"spot: checkpoints go to {s.checkpoint} ({path}), which outlives any instance")
    planned = StoragePlan(
        system_disk_gib=SYSTEM_DISK_GIB, data_disk=disk, checkpoint_disk=ckpt_disk, cpfs=cpfs, oss=oss,
        checkpoint=s.checkpoint,
        checkpoint_path=path, dataset_uri=s.dataset_uri, dataset_gib=s.dataset_gib, checkpoint_gib=round(ckpt_gib, 2),
        retain_on_destroy=s.retain_on_destroy, dataset_sync=s.dataset_sync, notes=tuple(notes))
    copy = dataset_copy(planned)
    if copy is None:
        return planned
    return planned.model_copy(update={"notes": planned.notes + (
        f"dataset_sync at-boot: every node copies {s.dataset_uri} ({s.dataset_gib:,.0f} GiB) to {planned.dataset_dir} in "
        f"the background from its first boot on, about {copy.seconds / 60:,.0f} min at {copy.mbps:,.0f} MB/s "
        f"({copy.kind}: {copy.source}); TRAINSTACK_DATASET_DIR holds it, complete once "
        ".trainstack-dataset-complete is there",)})
