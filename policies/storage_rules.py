"""Disks and checkpoint storage: spot nodes need checkpoint storage that outlives them, ESSD disks their
performance level's minimum size, checkpoint storage the protect option (trainstack.rules.checks.storage)."""

from __future__ import annotations

from typing import Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from . import _base as B
    from . import _view as V
else:  # run by Pulumi from inside policies/
    import _base as B  # type: ignore[no-redef]
    import _view as V  # type: ignore[no-redef]

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy


def spot_requires_checkpoint_storage(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    return B.stack_policy(B.SPOT_REQUIRES_CHECKPOINT_STORAGE, level,
                          lambda args: V.stack_view(args.resources, "storage"))


def essd_minimum_size(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    return B.resource_policy(B.ESSD_MINIMUM_SIZE, level, lambda args: V.resource_view(args, "disks"))


def checkpoint_storage_protected(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    return B.resource_policy(B.CHECKPOINT_STORAGE_PROTECTED, level, lambda args: V.resource_view(args, "storage"))
