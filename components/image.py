"""Image: the ECS image the GPU nodes boot.

Either the profile's pinned ``image_id`` or the newest Alibaba public (``owners="system"``) image
of the planned family, looked up at deploy time. The resolver picks the family (UEFI families,
``..._uefi``, for types that only boot UEFI: ebmgn7ex, ebmgn8*, ...); this module never invents
an image ID. The lookup is a plain invoke, so the ID is a plain string at preview time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_alicloud as alicloud

from trainstack.errors import CloudApiError
from trainstack.plan import Plan


@dataclass(frozen=True)
class ImageChoice:
    image_id: str
    family: Optional[str]
    source: str  # "profile" | "family lookup"
    name: Optional[str] = None


def choose_image(plan: Plan, opts: Optional[pulumi.InvokeOptions] = None) -> ImageChoice:
    img = plan.image
    if img.image_id:
        return ImageChoice(image_id=img.image_id, family=None, source="profile")
    args = dict(image_family=img.image_family, owners="system", most_recent=True, status="Available")
    if plan.instance_type:
        args["instance_type"] = plan.instance_type
    found = alicloud.ecs.get_images(**args, opts=opts)
    images = [i for i in (found.images or []) if i.id]
    if not images:
        raise CloudApiError(
            f"no public image of family {img.image_family} in {plan.region} for {plan.instance_type}",
            hint="pin an image with image_id in the profile, or check the family with "
                 "`aliyun ecs DescribeImages --ImageFamily <family> --ImageOwnerAlias system`")
    return ImageChoice(image_id=images[0].id, family=img.image_family, source="family lookup",
                       name=getattr(images[0], "name", None))
