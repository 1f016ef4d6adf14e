"""Tags every trainstack resource carries: the profile's tags plus the markers policies rely on.

Markers (docs/DESIGN.md): training nodes carry ``trainstack:role=training`` and ``trainstack:zone``;
checkpoint storage carries ``trainstack:role=checkpoint``. ``trainstack:name`` ties a resource
to its profile. The profile cannot set ``trainstack:`` keys (the profile validator refuses them).

``trainstack:planned-price`` is how the policy pack sees what a node costs beyond its properties:
the on-demand price per node-hour the plan rests on and whose it is (``"6.0 CNY/h price-book"``),
so ``gpu-hourly-budget`` prices from the team's price book like the resolver (docs/policies.md
"Planned prices"). A tag is updated in place (terraform-provider-alicloud ace5bcf8:
resource_alicloud_instance.go:495 and resource_alicloud_ess_scaling_configuration.go:333, ``tags``
not ForceNew; trainstack/catalog/data/provider_facts.json), so a new price never replaces a node.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from trainstack.catalog.limits import service_limits
from trainstack.errors import InputError
from trainstack.plan import Plan, PlannedPrice

ROLE = "trainstack:role"
ZONE = "trainstack:zone"
NAME = "trainstack:name"

#: Most tags a resource takes (data/service_limits.yaml): ECS/VPC/RAM resources and OSS buckets.
MAX_TAGS = int(service_limits().number("ecs.tags.max_per_resource"))
MAX_BUCKET_TAGS = int(service_limits().number("oss.bucket.max_tags"))

ROLE_TRAINING = "training"
ROLE_CHECKPOINT = "checkpoint"
PLANNED_PRICE = "trainstack:planned-price"
_PRICE_TEXT = re.compile(r"(\d+(?:\.\d+)?) CNY/h ([a-z][a-z-]*)")


def planned_price(plan: Plan) -> Optional[PlannedPrice]:
    """The on-demand price of one machine (node, or DLC pod) per hour, and whose it is; None when the
    plan rests on no price (a quota without a price-book entry, a DLC spec priced by proxy)."""
    p = plan.prices
    if p is None or p.on_demand_cny_per_hour is None or p.source == "none":
        return None
    per_machine = p.on_demand_cny_per_hour * (plan.gpus_per_node if p.per == "GPU" else 1)
    return PlannedPrice(cny_per_hour=round(per_machine, 4), source=p.source)


def price_text(price: PlannedPrice) -> str:
    return f"{price.cny_per_hour:.4f} CNY/h {price.source}"


def parse_price_text(text: object) -> Optional[PlannedPrice]:
    """The price a ``trainstack:planned-price`` tag says (None: no such tag, or not one trainstack wrote)."""
    m = _PRICE_TEXT.fullmatch(text.strip()) if isinstance(text, str) else None
    return PlannedPrice(cny_per_hour=float(m.group(1)), source=m.group(2)) if m else None


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
#: a self-healing pool node's tag naming the scale-to-0 rule its agent executes when the job ends
SCALE_RULE_TAG = "trainstack:scale-to-zero"
#: a node's rank, or ``pool`` on a multi-node self-healing pool's nodes (they take theirs from the rendezvous)
NODE_RANK = "trainstack:node-rank"


def node_tags(plan: Plan, zone: str, rank: "int | str", job_settings_digest: Any = None,
              scale_rule: Any = None) -> dict[str, Any]:
    """Training-node tags; GPU model, count and the planned price are plain values policies read at preview.
    ``rank``: the node's rank, or ``pool`` (a multi-node self-healing pool's nodes take theirs from
    the rendezvous). ``job_settings_digest`` (a string or a deploy-time Output) adds the job settings tag."""
    tags: dict[str, Any] = base_tags(plan, role=ROLE_TRAINING, zone=zone)
    tags[NODE_RANK] = str(rank)
    tags["trainstack:gpus-per-node"] = str(plan.gpus_per_node)
    if plan.gpu_model:
        tags["trainstack:gpu-model"] = plan.gpu_model
    if (price := planned_price(plan)) is not None:
        tags[PLANNED_PRICE] = price_text(price)
    if job_settings_digest is not None:
        tags[JOB_SETTINGS] = job_settings_digest
    if scale_rule is not None:  # the pool's scale-to-0 rule (its ARI: a deploy-time value)
        tags[SCALE_RULE_TAG] = scale_rule
    return within_limit(tags, MAX_TAGS, "a GPU node")


def within_limit(tags: dict[str, str], limit: int, what: str) -> dict[str, str]:
    """The tags, or a clear error when the profile's tags plus trainstack's markers are too many."""
    if len(tags) > limit:
        own = len([k for k in tags if not k.startswith("trainstack:")])
        raise InputError(f"{what} takes at most {limit} tags; the profile's {own} plus trainstack's "
                         f"{len(tags) - own} markers are {len(tags)}", hint="drop some profile tags")
    return tags
