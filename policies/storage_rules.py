"""Disks and checkpoint storage: spot nodes need shared checkpoint storage, ESSD disks their
performance level's minimum size, checkpoint storage the protect option.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from ._base import (
        CHECKPOINT_STORAGE_PROTECTED,
        ESSD_MINIMUM_SIZE,
        SPOT_REQUIRES_CHECKPOINT_STORAGE,
        catalog,
        level_or_default,
    )
    from . import _nodes as N
    from . import _props as P
else:  # run by Pulumi from inside policies/
    from _base import (
        CHECKPOINT_STORAGE_PROTECTED,
        ESSD_MINIMUM_SIZE,
        SPOT_REQUIRES_CHECKPOINT_STORAGE,
        catalog,
        level_or_default,
    )  # type: ignore[no-redef]
    import _nodes as N  # type: ignore[no-redef]
    import _props as P  # type: ignore[no-redef]

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from trainstack.plan import ESSD_MIN_GIB


# ---- 3. spot-requires-checkpoint-storage ------------------------------------------------------
def spot_requires_checkpoint_storage(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        cat = catalog()
        spot = [n for n in N.stack_nodes(args.resources)
                if n.spot and n.count != 0 and (n.training or any(cat.knows(t) for t in n.instance_types))]
        if not spot or any(r.resource_type in N.SHARED_STORAGE_TYPES for r in args.resources):
            return
        report(f"{P.names(n.label() for n in spot)}: spot GPU nodes can be reclaimed with 5 minutes' notice "
               "and the stack has no shared checkpoint storage (CPFS, NAS or OSS): add one "
               "(profile storage.checkpoint: cpfs or oss) or use on-demand nodes")

    return StackValidationPolicy(
        name=SPOT_REQUIRES_CHECKPOINT_STORAGE,
        description="Checks whether a stack with spot GPU nodes also declares shared persistent "
                    "checkpoint storage (CPFS or NAS file system, or OSS bucket).",
        validate=validate,
        enforcement_level=level_or_default(SPOT_REQUIRES_CHECKPOINT_STORAGE, level),
    )


# ---- 4. essd-minimum-size ---------------------------------------------------------------------
_LEVELS = sorted(ESSD_MIN_GIB, key=ESSD_MIN_GIB.get)


def _disks(resource_type: str, p: dict) -> Iterable[tuple[str, Any, Any, Any]]:
    """(label, category, performance level, size) of every disk a resource declares."""
    if resource_type in (N.ECS_DISK, N.DISK):
        yield "disk", p.get("category"), p.get("performanceLevel"), p.get("size")
        return
    if resource_type not in N.NODE_TYPES:
        return
    for i, d in enumerate(P.as_list(p.get("dataDisks"))):
        if isinstance(d, dict):
            yield (f"data disk {i}", P.first(d, "category", "diskCategory"), d.get("performanceLevel"),
                   P.first(d, "size", "diskSize"))
    system = p.get("systemDisk")
    if isinstance(system, dict):  # EcsLaunchTemplate
        yield "system disk", system.get("category"), system.get("performanceLevel"), system.get("size")
    elif "systemDiskCategory" in p:
        yield "system disk", p["systemDiskCategory"], p.get("systemDiskPerformanceLevel"), p.get("systemDiskSize")


def essd_minimum_size(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        for label, category, pl, size in _disks(args.resource_type, P.plain(args.props)):
            if P.as_str(category) != "cloud_essd":
                continue
            pl = P.as_str(pl) or "PL1"
            size_gib = P.as_int(size)
            minimum = ESSD_MIN_GIB.get(pl)
            if size_gib is None or minimum is None or size_gib >= minimum:
                continue
            fits = [lv for lv in _LEVELS if ESSD_MIN_GIB[lv] <= size_gib]
            lower = f" or use {fits[-1]} at this size" if fits else ""
            report(f"{args.name}: {label} is cloud_essd {pl} at {size_gib} GiB; {pl} needs at least "
                   f"{minimum} GiB: set size to {minimum} or more{lower}")

    return ResourceValidationPolicy(
        name=ESSD_MINIMUM_SIZE,
        description="Checks whether ESSD disks (data, system and standalone disks) are at least the "
                    "minimum size of their performance level (PL2 461 GiB, PL3 1261 GiB).",
        validate=validate,
        enforcement_level=level_or_default(ESSD_MINIMUM_SIZE, level),
    )


# ---- 9. checkpoint-storage-protected (advisory) ------------------------------------------------
def checkpoint_storage_protected(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        p = P.plain(args.props)
        if "tags" not in p or P.role(p) != N.CHECKPOINT:
            return
        if args.opts is not None and args.opts.protect:
            return
        report(f"{args.name}: checkpoint storage is not protected: set protect=True "
               "(profile storage.retain_on_destroy: true) so `pulumi destroy` cannot delete checkpoints")

    return ResourceValidationPolicy(
        name=CHECKPOINT_STORAGE_PROTECTED,
        description="Checks whether checkpoint storage (tagged trainstack:role=checkpoint) has the "
                    "protect resource option set.",
        validate=validate,
        enforcement_level=level_or_default(CHECKPOINT_STORAGE_PROTECTED, level),
    )
