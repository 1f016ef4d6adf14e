"""Tags every trainstack resource carries: the profile's tags plus the markers policies rely on.

Markers (docs/DESIGN.md): training nodes carry ``trainstack:role=training`` and ``trainstack:zone``;
checkpoint storage carries ``trainstack:role=checkpoint``. ``trainstack:name`` ties a resource
to its profile. The profile cannot set ``trainstack:`` keys (the profile validator refuses them).
"""

from __future__ import annotations

from typing import Any, Optional

from trainstack.catalog.limits import service_limits
from trainstack.errors import InputError
from trainstack.plan import Plan

ROLE = "trainstack:role"
ZONE = "trainstack:zone"
NAME = "trainstack:name"

#: Most tags a resource takes (data/service_limits.yaml): ECS/VPC/RAM resources and OSS buckets.
MAX_TAGS = int(service_limits().number("ecs.tags.max_per_resource"))
MAX_BUCKET_TAGS = int(service_limits().number("oss.bucket.max_tags"))

ROLE_TRAINING = "training"
ROLE_CHECKPOINT = "checkpoint"


def base_tags(plan: Plan, role: Optional[str] = None, zone: Optional[str] = None) -> dict[str, str]:
    tags = dict(plan.tags)
    tags[NAME] = plan.name
    if role:
        tags[ROLE] = role
    if zone:
        tags[ZONE] = zone
    return tags


#: The SHA-256 of the job settings document the node trusts (trainstack.bootstrap.render.JOB_SETTINGS_TAG).
JOB_SETTINGS = "trainstack:job-settings"


def node_tags(plan: Plan, zone: str, rank: "int | str", job_settings_digest: Any = None) -> dict[str, Any]:
    """Training-node tags; GPU model and count are plain values policies can read at preview.
    ``rank``: the node's rank, or ``pool`` (a multi-node self-healing pool's nodes take theirs from
    the rendezvous). ``job_settings_digest`` (a string or a deploy-time Output) adds the job settings tag."""
    tags: dict[str, Any] = base_tags(plan, role=ROLE_TRAINING, zone=zone)
    tags["trainstack:node-rank"] = str(rank)
    tags["trainstack:gpus-per-node"] = str(plan.gpus_per_node)
    if plan.gpu_model:
        tags["trainstack:gpu-model"] = plan.gpu_model
    if job_settings_digest is not None:
        tags[JOB_SETTINGS] = job_settings_digest
    return within_limit(tags, MAX_TAGS, "a GPU node")


def within_limit(tags: dict[str, str], limit: int, what: str) -> dict[str, str]:
    """The tags, or a clear error when the profile's tags plus trainstack's markers are too many."""
    if len(tags) > limit:
        own = len([k for k in tags if not k.startswith("trainstack:")])
        raise InputError(f"{what} takes at most {limit} tags; the profile's {own} plus trainstack's "
                         f"{len(tags) - own} markers are {len(tags)}", hint="drop some profile tags")
    return tags
