"""The boot image of a placement: pinned by the profile, or a family looked up at deploy time.

The image family follows the instance family's sourced boot mode (``InstanceFamily.boot_mode``,
families.yaml): a family whose doc says its images must boot UEFI gets the ``_uefi`` image family;
one whose doc states nothing gets the default family (the lookup still filters by instance type).
Day two: the looked-up image is in the nodes' ``ignore_changes`` (trainstack.layout.lifecycle), so a
changed image choice reaches new nodes only; running nodes and their disks are left alone.
"""

from __future__ import annotations

from typing import Optional

from ..catalog.limits import service_limits
from ..catalog.models import ResolvedInstance
from ..plan import ImagePlan
from ..profile import TrainingProfile

IMAGE_FAMILY = str(service_limits().value("ecs.image.family.default"))
IMAGE_FAMILY_UEFI = str(service_limits().value("ecs.image.family.uefi"))


def boot_note(inst: ResolvedInstance) -> Optional[str]:
    """``family X boots UEFI images only [TAG: "quote"]``, or None when its doc states no boot mode."""
    fam = inst.family
    if fam.boot_mode is None:
        return None
    cite = fam.cite("boot_mode")
    said = f" [{cite.source}: \"{cite.quote}\"]" if cite else ""
    what = "UEFI images only" if fam.boot_mode == "uefi" else f"in {fam.boot_mode} mode"
    return f"family {fam.name} boots {what}{said}"


def plan_image(profile: TrainingProfile, inst: Optional[ResolvedInstance]) -> ImagePlan:
    uefi = bool(inst and inst.family.uefi_required)
    notes = []
    if profile.image_id:
        notes.append(f"image pinned by the profile: {profile.image_id}"
                     + (f", holding {', '.join(profile.image_provides)} (image_provides: the nodes' setup finds them "
                        "and installs nothing; a part the image lacks is installed after all, with a warning)"
                        if profile.image_provides else ""))
    else:
        notes.append("image looked up by family at deploy time (newest system image of the family)")
    if inst is not None and (note := boot_note(inst)):
        notes.append(note + (f": image family {IMAGE_FAMILY_UEFI}" if uefi and not profile.image_id
                             else "; the pinned image must boot UEFI" if uefi else ""))
    return ImagePlan(image_id=profile.image_id, image_family=IMAGE_FAMILY_UEFI if uefi else IMAGE_FAMILY,
                     uefi=uefi, container_image=profile.job.image, provides=tuple(profile.image_provides),
                     notes=tuple(notes))
