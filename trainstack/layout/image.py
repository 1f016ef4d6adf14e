"""The boot image of a placement: pinned by the profile, or a family looked up at deploy time."""

from __future__ import annotations

from typing import Optional

from ..catalog.limits import service_limits
from ..catalog.models import ResolvedInstance
from ..plan import ImagePlan
from ..profile import TrainingProfile

IMAGE_FAMILY = str(service_limits().value("ecs.image.family.default"))
IMAGE_FAMILY_UEFI = str(service_limits().value("ecs.image.family.uefi"))


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
