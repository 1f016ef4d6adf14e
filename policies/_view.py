"""The stack view (trainstack.rules.stack_view) from the resources the Pulumi engine sends.

Each builder reads one resource's :func:`_props.plain` props: values every reading needs are read
through the ``_props`` coercers (an unknown one raises the engine's ``UnknownValueError``: "can't run
policy"); values a policy reads only when it gets to them become ``stack_view.Unknown``. GPU nodes
come from ``_nodes``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from trainstack.rules import stack_view as V
from trainstack.rules.checks.ram import statements

if __package__:
    from . import _nodes as N
    from . import _props as P
else:  # run by Pulumi from inside policies/
    import _nodes as N  # type: ignore[no-redef]
    import _props as P  # type: ignore[no-redef]

RAM_POLICY = "alicloud:ram/policy:Policy"
RAM_ATTACHMENTS = ("alicloud:ram/rolePolicyAttachment:RolePolicyAttachment",
                   "alicloud:ram/userPolicyAttachment:UserPolicyAttachment",
                   "alicloud:ram/groupPolicyAttachment:GroupPolicyAttachment")
DISK_TYPES = (N.ECS_DISK, N.DISK)


def maybe(value: Any) -> Any:
    """A plain value as the view holds it: an engine unknown becomes ``stack_view.Unknown``."""
    return V.Unknown(sentinel=value.sentinel, path=value.path) if P.is_unknown(value) else value


def _size(value: Any) -> Any:
    return maybe(value) if P.is_unknown(value) else P.as_int(value)


def _text(value: Any) -> Any:
    return maybe(value) if P.is_unknown(value) else P.as_str(value)


def _disk(name: str, label: str, category: Any, level: Any, size: Any) -> V.Disk:
    return V.Disk(resource=name, label=label, category=_text(category), performance_level=_text(level),
                  size_gib=_size(size))


def disks_of(resource_type: str, p: Mapping[str, Any], name: str) -> list[V.Disk]:
    """Every disk a resource declares (a standalone disk, or a node's data and system disks)."""
    if resource_type in DISK_TYPES:
        return [_disk(name, "disk", p.get("category"), p.get("performanceLevel"), p.get("size"))]
    if not N.declares_node(resource_type, p):
        return []
    out = [_disk(name, f"data disk {i}", P.first(d, "category", "diskCategory"), d.get("performanceLevel"),
                 P.first(d, "size", "diskSize"))
           for i, d in enumerate(P.as_list(p.get("dataDisks"))) if isinstance(d, dict)]
    system = p.get("systemDisk")
    if isinstance(system, dict):  # EcsLaunchTemplate
        out.append(_disk(name, "system disk", system.get("category"), system.get("performanceLevel"),
                         system.get("size")))
    elif "systemDiskCategory" in p:
        out.append(_disk(name, "system disk", p["systemDiskCategory"], p.get("systemDiskPerformanceLevel"),
                         p.get("systemDiskSize")))
    return out


def ingress_of(resource_type: str, p: Mapping[str, Any], name: str) -> list[V.IngressRule]:
    if resource_type != N.SECURITY_GROUP_RULE:
        return []
    return [V.IngressRule(resource=name, direction=P.as_str(p.get("type")), policy=P.as_str(p.get("policy")),
                          protocol=P.as_str(p.get("ipProtocol")), port_range=_text(p.get("portRange")),
                          sources=tuple((k, _text(p[k])) for k in ("cidrIp", "ipv6CidrIp") if k in p))]


def ram_of(resource_type: str, p: Mapping[str, Any], name: str) -> tuple[list[V.RamPolicy], list[V.RamAttachment]]:
    if resource_type == RAM_POLICY:
        doc = p.get("policyDocument", p.get("document"))
        return [V.RamPolicy(resource=name, statements=() if P.is_unknown(doc) else statements(doc))], []
    if resource_type in RAM_ATTACHMENTS:
        return [], [V.RamAttachment(resource=name, policy_type=P.as_str(p.get("policyType")),
                                    policy_name=P.as_str(p.get("policyName")))]
    return [], []


def tagged_of(resource_type: str, p: Mapping[str, Any], name: str) -> list[V.Tagged]:
    if N.is_dlc_job(p) or (resource_type not in N.TAGGABLE_TYPES and "tags" not in p):
        return []
    return [V.Tagged(resource=name, resource_type=resource_type, tags={k: maybe(v) for k, v in P.tags(p).items()})]


def instance_of(resource_type: str, p: Mapping[str, Any], name: str) -> list[V.InstanceSettings]:
    if not N.declares_node(resource_type, p):
        return []
    return [V.InstanceSettings(
        resource=name, resource_type=resource_type, has_deployment_set="deploymentSetId" in p,
        deployment_set=_text(p.get("deploymentSetId")),  # "" (no set) reads as None
        spot_strategy=_text(p.get("spotStrategy")) or "NoSpot",
        http_endpoint=_text(p.get("httpEndpoint")), http_tokens=_text(p.get("httpTokens")))]


def storage_of(resource_type: str, p: Mapping[str, Any], name: str, protect: bool) -> list[V.Storage]:
    """What may hold checkpoints: its role tag (unknown while the tags are), protection and lifetime."""
    if "tags" not in p:
        return []
    tags = p["tags"]
    role = maybe(tags) if P.is_unknown(tags) else maybe(tags.get(P.ROLE_TAG)) if isinstance(tags, dict) else None
    outlives = resource_type in N.SHARED_STORAGE_TYPES or (
        resource_type in DISK_TYPES and p.get("deleteWithInstance") in (None, False))
    return [V.Storage(resource=name, resource_type=resource_type, role=role, protect=protect,
                      outlives_instances=outlives)]


#: the resource types that can hold each part (None: any resource with ``tags``, or a DLC job)
PART_TYPES: dict[str, Optional[frozenset[str]]] = {
    # a dynamic resource only when its kind is the ESS scaling configuration (N.declares_node)
    "disks": frozenset(N.NODE_TYPES) | frozenset(DISK_TYPES) | {N.DYNAMIC},
    "ingress": frozenset({N.SECURITY_GROUP_RULE}), "instances": frozenset(N.NODE_TYPES) | {N.DYNAMIC}, "ram_policies": frozenset({RAM_POLICY, *RAM_ATTACHMENTS}),
    "ram_attachments": frozenset({RAM_POLICY, *RAM_ATTACHMENTS}), "nodes": None, "tagged": None, "storage": None,
}


def resource_view(args: Any, *parts: str) -> V.StackView:
    """The view of the one resource a resource policy is called with (only the ``parts`` it judges)."""
    t, name = args.resource_type, args.name
    if all(PART_TYPES[part] is not None and t not in PART_TYPES[part] for part in parts):
        return V.StackView()  # nothing of this resource is judged: its props are never read
    p = P.plain_props(args.props)
    out: dict[str, Any] = {}
    for part in parts:
        if part == "nodes":
            node = N.node_of(t, p, name, args.urn)
            out["nodes"] = (node,) if node is not None else ()
        elif part == "storage":
            protect = bool(args.opts is not None and args.opts.protect)
            out["storage"] = tuple(storage_of(t, p, name, protect))
        elif part in ("ram_policies", "ram_attachments"):
            policies, attachments = ram_of(t, p, name)
            out["ram_policies"], out["ram_attachments"] = tuple(policies), tuple(attachments)
        else:
            builder = {"disks": disks_of, "ingress": ingress_of, "tagged": tagged_of, "instances": instance_of}[part]
            out[part] = tuple(builder(t, p, name))
    return V.StackView(**out)


def stack_view(resources: list[Any], *parts: str) -> V.StackView:
    """The view of a whole stack (``PolicyResource`` list) for a stack policy: nodes, and ``storage``."""
    props = {id(r): P.plain_props(r.props) for r in resources}
    out: dict[str, Any] = {"nodes": tuple(N.stack_nodes(resources, props)), "region": N.stack_region(resources)}
    if "storage" in parts:
        out["storage"] = tuple(s for r in resources for s in storage_of(
            r.resource_type, props[id(r)], r.name, bool(getattr(r, "opts", None) and r.opts.protect)))
    return V.StackView(**out)


def provider_region_of(resource: Any) -> Optional[str]:
    return N.provider_region(getattr(resource, "provider", None))


def full_view(resources: list[Any]) -> V.StackView:
    """Every part of the view of a whole stack (``PolicyResource`` list), in the resources' order."""
    parts: dict[str, list] = {k: [] for k in ("disks", "ingress", "ram_policies", "ram_attachments", "tagged",
                                              "instances", "storage")}
    for r in resources:
        p, t, name = P.plain_props(r.props), r.resource_type, r.name
        parts["disks"] += disks_of(t, p, name)
        parts["ingress"] += ingress_of(t, p, name)
        policies, attachments = ram_of(t, p, name)
        parts["ram_policies"] += policies
        parts["ram_attachments"] += attachments
        parts["tagged"] += tagged_of(t, p, name)
        parts["instances"] += instance_of(t, p, name)
        parts["storage"] += storage_of(t, p, name, bool(getattr(r, "opts", None) and r.opts.protect))
    return V.StackView(nodes=tuple(N.stack_nodes(resources)), region=N.stack_region(resources),
                       **{k: tuple(v) for k, v in parts.items()})
