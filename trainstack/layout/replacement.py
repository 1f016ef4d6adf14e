"""What one preemption costs a self-healing plan (docs/self-healing.md "Warm replacements and what a
preemption costs").

On the reclaim notice ESS launches a replacement (``spot_instance_remedy``), which goes through the
setup phases of ``data/replacement_phases.yaml`` (launch, boot, node programs, GPU driver, eRDMA
stack, PyTorch) while the reclaimed node trains out its notice window; once that node is released and
the replacement is set up, the rendezvous completes and every node reloads the latest checkpoint. A
prepared image (``image_id`` with ``image_provides``) skips the driver, eRDMA and PyTorch installs.
The survivors (node 0 and the other pool nodes) wait from the release at their prices; the replacement
bills from its launch. Every figure keeps its label (measured, sourced, assumed), so a reader sees
what the sum rests on. Pure: the plan's parts in, a ReplacementEstimate out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, get_args

from ..catalog.limits import service_limits
from ..catalog.replacement_phases import replacement_facts, replacement_phases
from ..plan import ReplacementEstimate, ReplacementPhase, StoragePlan
from ..profile.model import ImagePart
from .storage import CHECKPOINTS_KEPT, MB_PER_GIB, OSS_READ_MBPS, dataset_copy
#: what a prepared image can hold (the profile's ``image_provides``)
IMAGE_PARTS: tuple[str, ...] = get_args(ImagePart)


def restore_phase(storage: StoragePlan) -> Optional[ReplacementPhase]:
    """Every node reloads the latest checkpoint: one checkpoint's GiB over the storage's read throughput."""
    if not storage.checkpoint_gib:
        return None
    one_gib = storage.checkpoint_gib / CHECKPOINTS_KEPT
    if storage.checkpoint == "cpfs" and storage.cpfs is not None:
        per_tib = service_limits().value("cpfs.baseline_mbps_per_tib")
        assert isinstance(per_tib, dict)
        mbps = float(per_tib[storage.cpfs.storage_type]) * storage.cpfs.capacity_gib / 1024
        if storage.cpfs.throughput_mbps:
            mbps = min(mbps, storage.cpfs.throughput_mbps)
        kind, source = "sourced", (f"CPFS-SPEC: {storage.cpfs.storage_type} baseline {per_tib[storage.cpfs.storage_type]} "
                                   f"MB/s per TiB x {storage.cpfs.capacity_gib:,} GiB = {mbps:,.0f} MB/s, over one "
                                   f"checkpoint of {one_gib:,.0f} GiB (the plan's estimate)")
    else:
        mbps = OSS_READ_MBPS
        kind, source = "assumed", (f"OSS read at {OSS_READ_MBPS:,.0f} MB/s (no per-bucket figure found), over one "
                                   f"checkpoint of {one_gib:,.0f} GiB (the plan's estimate)")
    seconds = round(one_gib * MB_PER_GIB / mbps, 1)
    return ReplacementPhase(name="checkpoint_restore", what="every node loads the latest checkpoint and training resumes",
                            seconds=seconds, cold_seconds=seconds, kind=kind, source=source,  # type: ignore[arg-type]
                            stage="resume")


def replacement_phases_for(rdma: str, provides: tuple[str, ...], storage: StoragePlan) -> list[ReplacementPhase]:
    out = []
    for fact in replacement_phases():
        if fact.applies == "erdma" and rdma != "erdma":
            continue
        skipped = f"the image provides {fact.skipped_by} (image_provides)" if fact.skipped_by in provides else None
        out.append(ReplacementPhase(
            name=fact.name, what=fact.what, seconds=0.0 if skipped else fact.seconds, cold_seconds=fact.seconds,
            kind=fact.kind, source=fact.source, skipped=skipped, stage=fact.stage, before_launch=fact.before_launch))
    restore = restore_phase(storage)
    return out + ([restore] if restore else [])


@dataclass(frozen=True)
class Timeline:
    """One replacement's timeline, in seconds."""

    join_wait: float  # the release to the replacement's agent joining (what torchrun's join_timeout bounds)
    wait: float  # the release to training again: the survivors' wait
    billed: float  # the replacement's launch to training again


def timeline(phases: list[ReplacementPhase], notice: float) -> Timeline:
    """Setup phases run from the notice on; the reclaimed node trains until its release at ``notice``; the
    resume phases start when both the release and the setup are done."""
    setup = sum(p.seconds for p in phases if p.stage == "setup")
    before_launch = sum(p.seconds for p in phases if p.before_launch)
    resume = sum(p.seconds for p in phases if p.stage == "resume")
    ready = max(setup, notice)
    return Timeline(join_wait=round(ready - notice, 1), wait=round(ready - notice + resume, 1),
                    billed=round(ready + resume - before_launch, 1))


def estimate_replacement(*, nodes: int, rdma: str, provides: tuple[str, ...], storage: StoragePlan,
                         node0_hourly: Optional[float], pool_node_hourly: Optional[float],
                         allowance_hours: Optional[float], join_timeout_seconds: Optional[int]) -> ReplacementEstimate:
    """One pool node reclaimed: how long the survivors wait, and what the wait and the replacement bill.

    ``node0_hourly``: node 0 on-demand (None on a 1-node pool, which has no survivors);
    ``pool_node_hourly``: one pool node at spot; ``allowance_hours``: the extra hours the plan's spot
    allowance adds (how many preemptions of this length they pay for)."""
    phases = replacement_phases_for(rdma, provides, storage)
    notice = float(replacement_facts().notice.seconds or 0.0)
    now = timeline(phases, notice)
    cold = timeline(replacement_phases_for(rdma, (), storage), notice)
    prepared = timeline(replacement_phases_for(rdma, IMAGE_PARTS, storage), notice)
    copy = dataset_copy(storage)
    survivors = nodes - 1
    survivors_hourly = None
    if survivors == 0:
        survivors_hourly = 0.0
    elif node0_hourly is not None and pool_node_hourly is not None:
        survivors_hourly = round(node0_hourly + (survivors - 1) * pool_node_hourly, 4)

    def cost(t: Timeline) -> Optional[float]:
        if survivors_hourly is None or pool_node_hourly is None:
            return None
        return round((survivors_hourly * t.wait + pool_node_hourly * t.billed) / 3600, 2)

    return ReplacementEstimate(
        phases=tuple(phases), notice_seconds=notice, seconds=now.wait, cold_seconds=cold.wait,
        prepared_seconds=prepared.wait, join_wait_seconds=now.join_wait, replacement_billed_seconds=now.billed,
        survivors=survivors, survivors_hourly_cny=survivors_hourly, replacement_hourly_cny=pool_node_hourly,
        cost_cny=cost(now), cold_cost_cny=cost(cold),
        allowance_preemptions=round(allowance_hours * 3600 / now.wait, 1) if allowance_hours and now.wait else None,
        join_timeout_seconds=join_timeout_seconds, dataset_copy_seconds=copy.seconds if copy else None,
        restore_from_oss=storage.checkpoint == "oss")


def replacement_labels(r: ReplacementEstimate) -> list[str]:
    """The plan's lines on it: time and money per preemption, cold against this image, what is assumed."""
    kinds = sorted({p.kind for p in r.phases if p.seconds})

    def listed(stage: str) -> str:
        return ", ".join(f"{p.name} {p.seconds:g} s {p.kind}" for p in r.phases if p.seconds and p.stage == stage)
    out = [f"per preemption: the cluster trains again {r.seconds / 60:.1f} min after a pool node's release "
           f"(setup from the {r.notice_seconds:g} s notice on: {listed('setup')}; then {listed('resume')})"]
    if r.cost_cny is not None and r.survivors:
        more = (f" (a cold replacement, no prepared image: {r.cold_seconds / 60:.1f} min, {r.cold_cost_cny:,.2f} CNY)"
                if r.cold_seconds > r.seconds else "")
        if r.prepared_seconds < r.seconds:
            parts = [p.skipped_by for p in replacement_phases() if p.skipped_by and p.name in
                     {q.name for q in r.phases if q.seconds}]
            more += (f"; a prepared image (image_id + image_provides: {', '.join(parts)}) cuts it to "
                     f"{r.prepared_seconds / 60:.1f} min")
        out.append(f"per preemption: {r.survivors} survivor(s) wait at {r.survivors_hourly_cny:.2f} CNY/h and the "
                   f"replacement bills from its launch: {r.cost_cny:,.2f} CNY{more}")
    if r.allowance_preemptions is not None:
        out.append(f"per preemption: the spot hours' restart allowance pays for about {r.allowance_preemptions:g} "
                   f"preemption(s) of this length")
    if r.join_timeout_seconds is not None and r.join_wait_seconds > r.join_timeout_seconds:
        out.append(f"per preemption: WARNING the replacement joins {r.join_wait_seconds:.0f} s after the release, "
                   f"later than the agents wait ({r.join_timeout_seconds} s): the job would fail instead of healing"
                   + ("; use a prepared image" if r.prepared_seconds < r.seconds else ""))
    if r.dataset_copy_seconds is not None:
        out.append(f"per preemption: the replacement copies the dataset in the background from its boot on "
                   f"({r.dataset_copy_seconds / 60:,.0f} min, storage.dataset_sync at-boot); its trainer reads "
                   "storage.dataset_uri until the copy completes"
                   + ("; it shares the node's network with the OSS checkpoint restore, which may take longer "
                      "than modelled" if r.restore_from_oss else ""))
    out.append(f"per preemption: figures {', '.join(kinds)} (docs/self-healing.md); not counted: {r.not_counted}")
    return out
