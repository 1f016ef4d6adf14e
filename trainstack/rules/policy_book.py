"""The policies of the rule book: names, what each judges, default levels and config schemas.

One list for the CrossGuard pack (``policies/``: each policy's factory reads its spec here) and the
CLI (``validate``, ``resolve``, ``plan``): the decisions themselves are the pure functions of
:mod:`.checks`, run over a :class:`~.stack_view.StackView`. Pack order is the order of
:data:`POLICY_SPECS`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

NO_PCIE_MULTI_GPU_TRAINING = "no-pcie-multi-gpu-training"
MULTI_NODE_REQUIRES_RDMA = "multi-node-requires-rdma"
SPOT_REQUIRES_CHECKPOINT_STORAGE = "spot-requires-checkpoint-storage"
ESSD_MINIMUM_SIZE = "essd-minimum-size"
NO_PUBLIC_SSH = "no-public-ssh"
GPU_HOURLY_BUDGET = "gpu-hourly-budget"
KNOWN_INSTANCE_TYPE = "known-instance-type"
NO_SPOT_IN_DEPLOYMENT_SET = "no-spot-in-deployment-set"
CHECKPOINT_STORAGE_PROTECTED = "checkpoint-storage-protected"
REQUIRED_TAGS = "required-tags"
NO_WILDCARD_OSS_ACCESS = "no-wildcard-oss-access"
METADATA_TOKENS_REQUIRED = "metadata-tokens-required"
SELF_HEALING_OVER_TCP = "self-healing-over-tcp"

#: ``trainstack:name`` is the tag the components put on every resource (trainstack/tags.py).
DEFAULT_REQUIRED_TAGS = ("trainstack:name",)

Level = Literal["mandatory", "advisory", "disabled"]


class PolicySpec(BaseModel):
    """One policy: ``kind`` resource (judged per resource) or stack (once, over every resource)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal["resource", "stack"]
    level: Literal["mandatory", "advisory"]
    description: str
    config_schema: dict[str, dict[str, Any]] = Field(default_factory=dict)


POLICY_SPECS: tuple[PolicySpec, ...] = (
    PolicySpec(name=NO_PCIE_MULTI_GPU_TRAINING, kind="resource", level="mandatory",
               description="Checks whether training nodes (ECS instances, scaling configurations, DLC jobs) "
                           "with more than one GPU have NVLink/NVSwitch between them rather than PCIe only.",
               config_schema={"allowed_types": {
                   "type": "array", "items": {"type": "string"}, "default": [],
                   "description": "PCIe multi-GPU types accepted anyway "
                                  "(e.g. data-parallel jobs without GPU-to-GPU traffic)"}}),
    PolicySpec(name=MULTI_NODE_REQUIRES_RDMA, kind="stack", level="mandatory",
               description="Checks whether more than one GPU training node uses RDMA-capable types (eRDMA with "
                           "a HighPerformance interface, or RoCE), all in the same trainstack:zone."),
    PolicySpec(name=SPOT_REQUIRES_CHECKPOINT_STORAGE, kind="stack", level="mandatory",
               description="Checks whether a stack with spot GPU nodes also declares checkpoint storage that "
                           "outlives a reclaimed node (a CPFS or NAS file system, an OSS bucket, or a disk not "
                           "deleted with its instance, tagged trainstack:role=checkpoint)."),
    PolicySpec(name=ESSD_MINIMUM_SIZE, kind="resource", level="mandatory",
               description="Checks whether ESSD disks (data, system and standalone disks) are at least the "
                           "minimum size of their performance level (PL2 461 GiB, PL3 1261 GiB)."),
    PolicySpec(name=NO_PUBLIC_SSH, kind="resource", level="mandatory",
               description="Checks whether security group rules open SSH (port 22, or all ports) to the whole "
                           "internet (0.0.0.0/0, ::/0, ::ffff:0.0.0.0/96 and other IPv4-embedding ranges) or to a "
                           "public range wider than /24 (IPv6: /48)."),
    PolicySpec(name=GPU_HOURLY_BUDGET, kind="stack", level="mandatory",  # not applicable until configured
               description="Checks whether the stack's GPU nodes cost more per hour than max_hourly_cost_cny "
                           "(the planned price each node carries, else catalog on-demand prices; the price "
                           "limit for spot nodes that set one).",
               config_schema={
                   "max_hourly_cost_cny": {"type": "number", "minimum": 0,
                                           "description": "Budget for all GPU nodes, CNY per hour; unset = off"},
                   "region": {"type": "string",
                              "description": "Region to price in when no alicloud provider region is visible "
                                             "(default: the catalog's default region, cn-shenzhen)"}}),
    PolicySpec(name=KNOWN_INSTANCE_TYPE, kind="resource", level="mandatory",
               description="Checks whether the GPU instance types of nodes, scaling configurations and DLC "
                           "jobs are known to the trainstack catalog."),
    PolicySpec(name=NO_SPOT_IN_DEPLOYMENT_SET, kind="resource", level="mandatory",
               description="Checks whether spot instances are placed in a deployment set, which Alibaba Cloud "
                           "rejects at apply time."),
    PolicySpec(name=CHECKPOINT_STORAGE_PROTECTED, kind="resource", level="advisory",
               description="Checks whether checkpoint storage (tagged trainstack:role=checkpoint) has the "
                           "protect resource option set."),
    PolicySpec(name=REQUIRED_TAGS, kind="resource", level="advisory",
               description="Checks whether taggable resources carry the required tags.",
               config_schema={"required_tags": {"type": "array", "items": {"type": "string"},
                                                "default": list(DEFAULT_REQUIRED_TAGS),
                                                "description": "Tag keys every taggable resource must have"}}),
    PolicySpec(name=NO_WILDCARD_OSS_ACCESS, kind="resource", level="mandatory",
               description="Checks whether RAM policies grant OSS access on a wildcard bucket (acs:oss:*:*:*, "
                           "team-*, Resource \"*\") or attach the all-bucket OSS system policies."),
    # mandatory: every node trainstack declares requires tokens (a pool's through the ESS API, issue 33)
    PolicySpec(name=METADATA_TOKENS_REQUIRED, kind="resource", level="mandatory",
               description="Checks whether ECS instances, launch templates and scaling configurations require "
                           "metadata tokens (IMDSv2); pulumi-alicloud's ess.ScalingConfiguration and EcsInstanceSet "
                           "cannot, trainstack's ess-scaling-configuration does."),
    # advisory: a multi-node self-healing cluster on a type whose RDMA ESS cannot give its pool nodes (RoCE;
    # eRDMA pools get one ERI each: docs/self-healing.md) talks TCP; set it mandatory to refuse such clusters
    PolicySpec(name=SELF_HEALING_OVER_TCP, kind="stack", level="advisory",
               description="Checks whether a multi-node self-healing cluster (an ESS pool of training nodes) runs "
                           "its eRDMA types without HighPerformance interfaces (over TCP)."),
)
SPECS_BY_NAME: dict[str, PolicySpec] = {s.name: s for s in POLICY_SPECS}
