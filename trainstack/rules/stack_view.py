"""What a stack declares that the policies judge, as typed, Pulumi-free data.

Two builders make it: ``policies/_view.py`` from the resources the Pulumi engine sends (CrossGuard,
``trainstack plan``), :mod:`.plan_view` from a Plan (``validate``, ``resolve``). The policies'
decisions (:mod:`.checks`) are pure functions over it, so the pack and the CLI give one verdict.

A value the engine does not know yet at preview is an :class:`Unknown` in the fields a policy reads
only when it gets to them; :func:`known` raises :class:`ValueUnknown` there, which the caller turns
into the engine's advisory "can't run policy" (never a crash). Fields every reading needs are read
eagerly by the builder instead.

The channel beyond properties: a GPU node's ``planned_price`` (the on-demand price per machine-hour
the plan rests on and whose it is) travels as the tag ``trainstack:planned-price`` on ECS nodes and
ESS scaling configurations, and as the plain inputs ``on_demand_cny_per_hour`` / ``price_source``
of the DLC job (trainstack.tags.planned_price_tag, docs/policies.md "Planned prices").
"""

from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field

from ..plan import PlannedPrice


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Unknown(_Frozen):
    """A value unknown at preview (an Output of another resource): the engine's sentinel and where."""

    sentinel: str = ""
    path: tuple[str, ...] = ()


class ValueUnknown(Exception):
    """A policy needs a value that is unknown (or, ``reason``, cannot be priced): it cannot run."""

    def __init__(self, value: Optional[Unknown] = None, reason: Optional[str] = None):
        super().__init__(reason or "unknown value")
        self.value, self.reason = value, reason


class NotApplicable(Exception):
    """The policy does not apply to this stack (e.g. no budget configured)."""


def known(value: Any) -> Any:
    """``value``, or :class:`ValueUnknown` when it is unknown at preview."""
    if isinstance(value, Unknown):
        raise ValueUnknown(value)
    return value


class GpuNode(_Frozen):
    """One GPU node declaration (a resource standing for ``count`` identical machines)."""

    name: str
    urn: str = ""
    resource_type: str
    kind: Literal["ecs", "instance-set", "launch-template", "ess", "dlc"]
    instance_types: tuple[str, ...] = ()
    training: bool = False
    count: Optional[int] = 1  # None: decided elsewhere (an ESS scaling group)
    spot: bool = False
    spot_strategy: str = "NoSpot"
    spot_price_limits: dict[str, float] = Field(default_factory=dict)  # type -> CNY/h; "*" = any
    zone: Union[str, None, Unknown] = None  # the trainstack:zone tag
    high_performance: bool = False  # an eRDMA (HighPerformance) interface on the node itself
    rdma_enabled: Optional[bool] = None  # DLC ``enable_rdma``
    gpus_per_pod: Optional[int] = None
    region: Optional[str] = None  # the DLC ``region`` input, else the node's provider region
    quota_id: Optional[str] = None  # a DLC quota job's ``resource_id``
    planned_price: Union[PlannedPrice, None, Unknown] = None

    @property
    def is_template(self) -> bool:
        return self.kind == "launch-template"

    def label(self) -> str:
        return self.name if self.count in (None, 1) else f"{self.name} (x{self.count})"


class Disk(_Frozen):
    """One disk a resource declares (a data or system disk of a node, or a standalone disk)."""

    resource: str
    label: str
    category: Union[str, None, Unknown] = None
    performance_level: Union[str, None, Unknown] = None
    size_gib: Union[int, None, Unknown] = None


class IngressRule(_Frozen):
    """An accepting-or-not security group rule, as far as SSH exposure is judged."""

    resource: str
    direction: Optional[str] = None
    policy: Optional[str] = None
    protocol: Optional[str] = None
    port_range: Union[str, None, Unknown] = None
    sources: tuple[tuple[str, Union[str, None, Unknown]], ...] = ()  # (cidrIp | ipv6CidrIp, value)


class RamStatement(_Frozen):
    """One statement of a RAM policy document, normalised (non-string actions kept as None)."""

    effect: str = "Allow"
    actions: Optional[tuple[Optional[str], ...]] = None
    resources: tuple[str, ...] = ()


class RamPolicy(_Frozen):
    resource: str
    statements: tuple[RamStatement, ...] = ()


class RamAttachment(_Frozen):
    resource: str
    policy_type: Optional[str] = None
    policy_name: Optional[str] = None


class Tagged(_Frozen):
    """A resource that takes tags, with the ones it has (values may be unknown)."""

    resource: str
    resource_type: str
    tags: dict[str, Union[str, None, Unknown]] = Field(default_factory=dict)


class InstanceSettings(_Frozen):
    """How an instance, instance set, launch template or scaling configuration is set up."""

    resource: str
    resource_type: str
    has_deployment_set: bool = False
    deployment_set: Union[str, None, Unknown] = None
    spot_strategy: Union[str, Unknown] = "NoSpot"
    http_endpoint: Union[str, None, Unknown] = None
    http_tokens: Union[str, None, Unknown] = None


class Storage(_Frozen):
    """A resource that may hold checkpoints: its ``trainstack:role`` tag, protection and lifetime."""

    resource: str
    resource_type: str
    has_tags: bool = True
    role: Union[str, None, Unknown] = None
    protect: bool = False
    outlives_instances: bool = True  # shared storage, or a disk not deleted with its instance


class StackView(_Frozen):
    """Everything of a stack the policies judge (a resource policy sees one resource's share)."""

    nodes: tuple[GpuNode, ...] = ()
    disks: tuple[Disk, ...] = ()
    ingress: tuple[IngressRule, ...] = ()
    ram_policies: tuple[RamPolicy, ...] = ()
    ram_attachments: tuple[RamAttachment, ...] = ()
    tagged: tuple[Tagged, ...] = ()
    instances: tuple[InstanceSettings, ...] = ()
    storage: tuple[Storage, ...] = ()
    region: Optional[str] = None  # the stack's provider region, when known
