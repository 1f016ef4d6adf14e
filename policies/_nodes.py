"""Recognise what a resource is for: GPU nodes, disks, storage, rules (by type token and markers).

Markers (docs/DESIGN.md): every training node carries the tags ``trainstack:role=training`` and
``trainstack:zone=<zone>`` (and, from trainstack, ``trainstack:planned-price``); the PAI-DLC job is a
resource (a ``pulumi-python:dynamic:Resource``) whose inputs hold ``kind: pai-dlc-job`` with its ECS
spec, pod count, RDMA setting and planned price; a self-healing pool's scaling configuration is a
dynamic resource whose inputs hold ``kind: ess-scaling-configuration`` and the provider resource's own
(camelCase) names (components/ess_pool.py), so it is read as a ScalingConfiguration. DLC inputs are read in both spellings
(``ecs_spec``/``ecsSpec``, ``pod_count``/``podCount``, ...). The nodes are the pure checks'
``GpuNode`` (trainstack.rules.stack_view).

Everything here takes :func:`_props.plain` props and reads values through the ``_props``
coercers, so an unknown value that matters raises the engine's ``UnknownValueError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from trainstack.dlc_job import KIND as DLC_KIND
from trainstack.layout.pool_configuration import KIND as ESS_KIND
from trainstack.plan import PlannedPrice
from trainstack.rules import stack_view as V
from trainstack.rules.checks.gpu import looks_like_gpu_type as _looks_like_gpu_type
from trainstack.rules.stack_view import GpuNode
from trainstack.tags import PLANNED_PRICE, parse_price_text

if __package__:
    from . import _props as P
else:  # run by Pulumi from inside policies/ (see __main__.py)
    import _props as P  # type: ignore[no-redef]

# ---- type tokens (pulumi-alicloud 4.0.0, reference/pulumi-notes.md §2-§4) -------------------
INSTANCE = "alicloud:ecs/instance:Instance"
INSTANCE_SET = "alicloud:ecs/ecsInstanceSet:EcsInstanceSet"
LAUNCH_TEMPLATE = "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate"
SCALING_CONFIGURATION = "alicloud:ess/scalingConfiguration:ScalingConfiguration"
SCALING_GROUP = "alicloud:ess/scalingGroup:ScalingGroup"
NETWORK_INTERFACE = "alicloud:ecs/ecsNetworkInterface:EcsNetworkInterface"
NETWORK_INTERFACE_ATTACHMENT = "alicloud:ecs/ecsNetworkInterfaceAttachment:EcsNetworkInterfaceAttachment"
ECS_DISK = "alicloud:ecs/ecsDisk:EcsDisk"
DISK = "alicloud:ecs/disk:Disk"
SECURITY_GROUP = "alicloud:ecs/securityGroup:SecurityGroup"
SECURITY_GROUP_RULE = "alicloud:ecs/securityGroupRule:SecurityGroupRule"
NAS_FILE_SYSTEM = "alicloud:nas/fileSystem:FileSystem"
OSS_BUCKET = "alicloud:oss/bucket:Bucket"
DYNAMIC = "pulumi-python:dynamic:Resource"
ALICLOUD_PROVIDER = "pulumi:providers:alicloud"

SPOT_STRATEGIES = ("SpotWithPriceLimit", "SpotAsPriceGo")
HIGH_PERFORMANCE = "HighPerformance"
TRAINING = "training"
CHECKPOINT = "checkpoint"

#: Resource types that carry instance types (and so may be GPU nodes).
NODE_TYPES = (INSTANCE, INSTANCE_SET, LAUNCH_TEMPLATE, SCALING_CONFIGURATION)
#: Types that support Alibaba tags (``required-tags`` judges these and anything with ``tags``).
TAGGABLE_TYPES = frozenset({
    INSTANCE, INSTANCE_SET, LAUNCH_TEMPLATE, SCALING_CONFIGURATION, SCALING_GROUP, NETWORK_INTERFACE,
    ECS_DISK, DISK, SECURITY_GROUP, NAS_FILE_SYSTEM, OSS_BUCKET,
    "alicloud:vpc/network:Network", "alicloud:vpc/switch:Switch",
})
#: Shared persistent storage that survives a spot reclaim: NAS (standard/extreme/CPFS) and OSS.
SHARED_STORAGE_TYPES = (NAS_FILE_SYSTEM, OSS_BUCKET)

def looks_like_gpu_type(name: str) -> bool:
    """ECS GPU family names (trainstack.rules.checks.gpu, where known-instance-type decides)."""
    return _looks_like_gpu_type(name)


def is_dlc_job(props: Mapping[str, Any]) -> bool:
    """The DLC job marker; ``kind`` is a literal, so an unknown ``kind`` is not a DLC job."""
    return props.get("kind") == DLC_KIND


def is_ess_configuration(resource_type: str, props: Mapping[str, Any]) -> bool:
    """trainstack's own ESS scaling configuration (a dynamic resource with ``kind: ess-scaling-configuration``)."""
    return resource_type == DYNAMIC and props.get("kind") == ESS_KIND


def declares_node(resource_type: str, props: Mapping[str, Any]) -> bool:
    """Whether the resource is a node declaration whose disks and instance settings the policies judge."""
    return resource_type in NODE_TYPES or is_ess_configuration(resource_type, props)


def spot_strategy(props: Mapping[str, Any]) -> str:
    return P.as_str(props.get("spotStrategy")) or "NoSpot"


#: A GPU node declaration, as the pure checks read it (trainstack.rules.stack_view.GpuNode).
Node = GpuNode


def _types(props: Mapping[str, Any], *keys: str) -> list[str]:
    out: list[str] = []
    for key in keys:
        if key not in props:
            continue
        for value in P.as_list(props[key]):
            if isinstance(value, Mapping):
                value = value.get("instanceType")
            value = P.as_str(value)
            if value and value not in out:
                out.append(value)
    return out


def _high_performance(props: Mapping[str, Any]) -> bool:
    modes = []
    if "networkInterfaceTrafficMode" in props:
        modes.append(props["networkInterfaceTrafficMode"])
    if "networkInterfaces" in props:
        for eni in P.as_list(props["networkInterfaces"]):
            if isinstance(eni, Mapping) and "networkInterfaceTrafficMode" in eni:
                modes.append(eni["networkInterfaceTrafficMode"])
    return any(P.as_str(m) == HIGH_PERFORMANCE for m in modes)


def _spot_limits(props: Mapping[str, Any], types: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    if "spotPriceLimit" in props:  # Instance, EcsInstanceSet, EcsLaunchTemplate
        limit = P.as_number(props["spotPriceLimit"])
        if limit:
            out["*"] = limit
    for row in P.as_list(props.get("spotPriceLimits")):  # ScalingConfiguration
        if isinstance(row, Mapping):
            t = P.as_str(row.get("instanceType"))
            limit = P.as_number(row.get("priceLimit"))
            if limit:
                out[t or "*"] = limit
    return out


def _planned_price(value: Any) -> Any:
    """The ``trainstack:planned-price`` tag (or DLC inputs) as a PlannedPrice; unknown stays unknown."""
    if P.is_unknown(value):
        return V.Unknown(sentinel=value.sentinel, path=value.path)
    return parse_price_text(value)


def node_of(resource_type: str, props: Mapping[str, Any], name: str, urn: str = "",
            region: Optional[str] = None) -> Optional[GpuNode]:
    """The GPU node a resource declares, or ``None`` when it declares none. ``region``: its provider's."""
    if is_dlc_job(props):
        return _dlc_node(props, name, urn, resource_type, region)
    if not declares_node(resource_type, props):
        return None
    kind = "ess" if is_ess_configuration(resource_type, props) else {
        INSTANCE: "ecs", INSTANCE_SET: "instance-set", LAUNCH_TEMPLATE: "launch-template",
        SCALING_CONFIGURATION: "ess"}[resource_type]
    keys = ("instanceType", "instanceTypes", "instanceTypeOverrides") if kind == "ess" else ("instanceType",)
    types = _types(props, *keys)
    strategy = spot_strategy(props)
    count: Optional[int] = 1
    if kind == "instance-set":
        count = P.as_int(props["amount"]) if "amount" in props else 1
    elif kind == "ess":
        count = None
    elif kind == "launch-template":
        count = 0
    return GpuNode(
        name=name, urn=urn, resource_type=resource_type, kind=kind, instance_types=tuple(types),
        training=P.role(props) == TRAINING, count=count,
        spot=strategy in SPOT_STRATEGIES, spot_strategy=strategy,
        spot_price_limits=_spot_limits(props, types) if strategy == "SpotWithPriceLimit" else {},
        zone=_maybe(P.tag(props, P.ZONE_TAG)), high_performance=_high_performance(props),
        region=(P.as_str(props.get("region")) or region) if kind == "ess" and resource_type == DYNAMIC else region,
        planned_price=_planned_price(P.tag(props, PLANNED_PRICE)))


def _maybe(value: Any) -> Any:
    return V.Unknown(sentinel=value.sentinel, path=value.path) if P.is_unknown(value) else value


def _dlc_node(props: Mapping[str, Any], name: str, urn: str, resource_type: str,
              provider_region: Optional[str]) -> GpuNode:
    types = _types(props, "ecs_spec", "ecsSpec")
    pods = P.first(props, "pod_count", "podCount", default=1)
    spot_raw = P.first(props, "spot", "use_spot_instance", "useSpotInstance", "spot_strategy", "spotStrategy")
    strategy = "NoSpot"
    if spot_raw is not None:
        spot_raw = P.need(spot_raw)
        if isinstance(spot_raw, str) and spot_raw in SPOT_STRATEGIES + ("NoSpot",):
            strategy = spot_raw
        elif P.as_bool(spot_raw):
            strategy = "SpotWithPriceLimit" if P.present(props, "spot_price_limit", "spotPriceLimit") \
                else "SpotAsPriceGo"
    limit = P.as_number(P.first(props, "spot_price_limit", "spotPriceLimit"))
    rdma = P.first(props, "enable_rdma", "enableRdma", "enableRDMA")
    price = P.first(props, "on_demand_cny_per_hour", "onDemandCnyPerHour")
    source = P.first(props, "price_source", "priceSource")
    planned: Any = None
    if P.is_unknown(price) or P.is_unknown(source):
        planned = V.Unknown(sentinel=(price if P.is_unknown(price) else source).sentinel)
    elif P.as_number(price) is not None and P.as_str(source):
        planned = PlannedPrice(cny_per_hour=P.as_number(price), source=P.as_str(source))
    return GpuNode(
        name=name, urn=urn, resource_type=resource_type, kind="dlc", instance_types=tuple(types),
        training=True, count=P.as_int(pods), spot=strategy in SPOT_STRATEGIES, spot_strategy=strategy,
        spot_price_limits={"*": limit} if limit and strategy != "NoSpot" else {},
        rdma_enabled=None if rdma is None else P.as_bool(rdma),
        gpus_per_pod=P.as_int(P.first(props, "gpus_per_pod", "gpusPerPod")),
        region=P.as_str(props.get("region")) or provider_region,
        quota_id=P.as_str(P.first(props, "resource_id", "resourceId")), planned_price=planned)


# ---- stack view -------------------------------------------------------------------------------
def _linked(resource: Any, prop: str, resource_type: str) -> list[Any]:
    """Resources of ``resource_type`` that ``resource.prop`` (else any input) depends on."""
    deps = list((getattr(resource, "property_dependencies", None) or {}).get(prop, []))
    hits = [d for d in deps if d.resource_type == resource_type]
    if not hits:
        hits = [d for d in getattr(resource, "dependencies", None) or [] if d.resource_type == resource_type]
    return hits


def stack_nodes(resources: list[Any], props: Optional[dict[int, Any]] = None) -> list[GpuNode]:
    """Every GPU node declaration of a stack (``PolicyResource`` list), counts and eRDMA resolved.

    ESS scaling configurations count their scaling group's ``maxSize`` (the worst case); an ENI
    attachment of a ``HighPerformance`` ``EcsNetworkInterface`` gives its instance eRDMA. Both
    links come from the engine's dependencies (``scalingGroupId``/``instanceId``/
    ``networkInterfaceId`` property dependencies). ``props``: each resource's plain props, by ``id``,
    when the caller has them already.
    """
    props = props if props is not None else {id(r): P.plain_props(r.props) for r in resources}
    groups = [r for r in resources if r.resource_type == SCALING_GROUP]
    hp_instances: set[str] = set()
    for r in resources:
        if r.resource_type != NETWORK_INTERFACE_ATTACHMENT:
            continue
        enis = _linked(r, "networkInterfaceId", NETWORK_INTERFACE)
        if any(P.as_str(props[id(e)].get("networkInterfaceTrafficMode")) == HIGH_PERFORMANCE for e in enis):
            hp_instances.update(i.urn for i in _linked(r, "instanceId", INSTANCE))
    nodes: list[GpuNode] = []
    for r in resources:
        node = node_of(r.resource_type, props[id(r)], r.name, r.urn, provider_region(getattr(r, "provider", None)))
        if node is None or node.is_template:
            continue
        update: dict[str, Any] = {"high_performance": True} if r.urn in hp_instances else {}
        if node.kind == "ess":
            linked = _linked(r, "scalingGroupId", SCALING_GROUP) or (groups if len(groups) == 1 else [])
            update["count"] = P.as_int(P.first(props[id(linked[0])], "maxSize", "desiredCapacity", default=1)) \
                if linked else 1
        nodes.append(node.model_copy(update=update) if update else node)
    return nodes


def provider_region(provider: Any) -> Optional[str]:
    """The ``region`` of an alicloud provider (``PolicyProviderResource``/``PolicyResource``)."""
    if provider is None or not str(getattr(provider, "resource_type", "")).startswith(ALICLOUD_PROVIDER):
        return None
    value = P.plain(provider.props).get("region")
    return value if isinstance(value, str) and value else None


def stack_region(resources: list[Any]) -> Optional[str]:
    """The region of the stack's alicloud provider, when the engine shows one."""
    for r in resources:
        region = provider_region(r) or provider_region(getattr(r, "provider", None))
        if region:
            return region
    return None
