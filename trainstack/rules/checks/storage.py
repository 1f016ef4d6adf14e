"""Disks and checkpoint storage: spot nodes need checkpoint storage that outlives them, ESSD disks their
performance level's minimum size, checkpoint storage the protect option."""

from __future__ import annotations

from typing import Iterator, Sequence

from ...catalog import Catalog
from ...plan import ESSD_MIN_GIB
from ..stack_view import Disk, StackView, Storage
from . import Finding
from .gpu import names
from .values import as_int, as_str

CHECKPOINT = "checkpoint"
_LEVELS = sorted(ESSD_MIN_GIB, key=ESSD_MIN_GIB.get)


def checkpoint_storage(view: StackView) -> list[Storage]:
    """What holds checkpoints and survives a reclaimed node: tagged ``trainstack:role=checkpoint``, on
    shared storage (CPFS/NAS, OSS) or a disk not deleted with its instance. None found while a role is
    still unknown: the policy cannot decide (ValueUnknown)."""
    lasting = [s for s in view.storage if s.outlives_instances]
    found = [s for s in lasting if isinstance(s.role, str) and s.role == CHECKPOINT]
    if not found:
        for s in lasting:
            as_str(s.role)  # raises for an unknown role
    return found


def spot_requires_checkpoint_storage(view: StackView, settings: dict, cat: Catalog) -> Iterator[Finding]:
    spot = [n for n in view.nodes
            if n.spot and n.count != 0 and (n.training or any(cat.knows(t) for t in n.instance_types))]
    if not spot or checkpoint_storage(view):
        return
    yield Finding(f"{names(n.label() for n in spot)}: spot GPU nodes can be reclaimed with 5 minutes' notice "
                  "and the stack has no checkpoint storage that outlives them (a CPFS/NAS file system, OSS bucket "
                  "or retained disk tagged trainstack:role=checkpoint): add one (profile storage.checkpoint: cpfs, "
                  "oss or essd) or use on-demand nodes")


def essd_minimum_size(disks: Sequence[Disk], settings: dict, cat: Catalog) -> Iterator[Finding]:
    for d in disks:
        if as_str(d.category) != "cloud_essd":
            continue
        pl = as_str(d.performance_level) or "PL1"
        size_gib = as_int(d.size_gib)
        minimum = ESSD_MIN_GIB.get(pl)
        if size_gib is None or minimum is None or size_gib >= minimum:
            continue
        fits = [lv for lv in _LEVELS if ESSD_MIN_GIB[lv] <= size_gib]
        lower = f" or use {fits[-1]} at this size" if fits else ""
        yield Finding(f"{d.resource}: {d.label} is cloud_essd {pl} at {size_gib} GiB; {pl} needs at least "
                      f"{minimum} GiB: set size to {minimum} or more{lower}", d.resource)


def checkpoint_storage_protected(items: Sequence[Storage], settings: dict, cat: Catalog) -> Iterator[Finding]:
    for s in items:
        if not s.has_tags or as_str(s.role) != CHECKPOINT or s.protect:
            continue
        yield Finding(f"{s.resource}: checkpoint storage is not protected: set protect=True "
                      "(profile storage.retain_on_destroy: true) so `pulumi destroy` cannot delete checkpoints",
                      s.resource)
