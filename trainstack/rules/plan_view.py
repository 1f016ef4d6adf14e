"""The stack view of a Plan: what ``components.TrainingStack`` declares that the policies judge, without
Pulumi, so ``validate`` and ``resolve`` give the verdicts ``plan`` and ``pulumi up`` give.

Every input comes from the pure function the component itself calls (tags: trainstack.tags; RAM
documents: trainstack.layout.identity; SSH sources: trainstack.layout.network.ssh_rule_cidrs; node
spot strategy, IPs and deployment sets: the Plan and trainstack.layout; lifecycle: layout.lifecycle;
the DLC job: trainstack.dlc_job.job_inputs). Resource names follow the components' own naming;
tests/rules/test_plan_view.py holds this view equal to the one the policy pack builds from the
recorded program, profile by profile, so the two cannot drift apart unseen.

Deploy-time values stand in as plain placeholders (a zone left to deploy time, the job-settings
digest, the stack bucket's final name, instance ids in the stop policy): no policy's verdict rests
on them.
"""

from __future__ import annotations

from typing import Any, Optional

from ..dlc_job import job_inputs
from ..layout import deployment_set_layout
from ..layout.identity import node_role_grants, scale_policy_document, stop_policy_document
from ..layout.lifecycle import network_lifecycle, retained, services_vswitch_lifecycle
from ..layout.network import ssh_rule_cidrs
from ..layout.pool_configuration import HTTP_TOKENS_REQUIRED, network_interfaces
from ..plan import Plan
from ..tags import PLANNED_PRICE, ROLE_CHECKPOINT, base_tags, node_tags, parse_price_text
from . import stack_view as V
from .checks.ram import statements
from .plan_rules import checkpoint_disks_planned

DEPLOY_ZONE = "(zone chosen at deploy time)"
DIGEST = "(job settings digest)"
T = {  # the resource types the components declare (pulumi-alicloud 4.0 tokens)
    "instance": "alicloud:ecs/instance:Instance", "disk": "alicloud:ecs/ecsDisk:EcsDisk",
    "sg": "alicloud:ecs/securityGroup:SecurityGroup", "rule": "alicloud:ecs/securityGroupRule:SecurityGroupRule",
    "vpc": "alicloud:vpc/network:Network", "vswitch": "alicloud:vpc/switch:Switch",
    "nat": "alicloud:vpc/natGateway:NatGateway", "eip": "alicloud:ecs/eipAddress:EipAddress",
    "bucket": "alicloud:oss/bucket:Bucket", "nas": "alicloud:nas/fileSystem:FileSystem",
    "role": "alicloud:ram/role:Role", "policy": "alicloud:ram/policy:Policy",
    "attachment": "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment",
    "group": "alicloud:ess/scalingGroup:ScalingGroup",
    "config": "alicloud:ess/scalingConfiguration:ScalingConfiguration",
    "dynamic": "pulumi-python:dynamic:Resource",
}


class _Builder:
    def __init__(self, plan: Plan, zone: str):
        self.plan, self.zone = plan, zone
        self.parts: dict[str, list] = {k: [] for k in ("nodes", "disks", "ingress", "ram_policies", "ram_attachments",
                                                       "tagged", "instances", "storage")}

    def tagged(self, name: str, kind: str, tags: dict[str, Any], protect: bool = False,
               deleted_with_instance: bool = False) -> None:
        """A resource with tags: what required-tags judges, and (by its role) what may hold checkpoints."""
        self.parts["tagged"].append(V.Tagged(resource=name, resource_type=T[kind], tags=dict(tags)))
        outlives = kind in ("bucket", "nas") or (kind == "disk" and not deleted_with_instance)
        self.parts["storage"].append(V.Storage(resource=name, resource_type=T[kind], role=tags.get("trainstack:role"),
                                               protect=protect, outlives_instances=outlives))

    def view(self) -> V.StackView:
        return V.StackView(region=self.plan.region, **{k: tuple(v) for k, v in self.parts.items()})


def plan_view(plan: Plan) -> V.StackView:
    """What ``TrainingStack(plan.name, plan)`` declares, as the policies see it."""
    b = _Builder(plan, plan.zone or DEPLOY_ZONE)
    _network(b, f"{plan.name}-network")
    _storage(b, f"{plan.name}-storage")
    if plan.target == "dlc":
        _dlc_job(b, f"{plan.name}-job")
    elif plan.elastic:
        _cluster(b, f"{plan.name}-cluster")
        _pool(b, f"{plan.name}-elastic-pool")
    elif plan.spot_pool is not None:
        _role(b, f"{plan.name}-pool-identity")
        _pool(b, f"{plan.name}-pool")
    else:
        _cluster(b, f"{plan.name}-cluster")
    return b.view()


def _network(b: _Builder, name: str) -> None:
    plan, net = b.plan, b.plan.network
    tags = base_tags(plan, role="network")
    b.tagged(f"{name}-vpc", "vpc", tags, protect=network_lifecycle(plan).protect)
    b.tagged(f"{name}-vswitch", "vswitch", tags)
    for part, cidr in (("eri", net.eri_vswitch_cidr), ("pool", net.pool_vswitch_cidr),
                       ("services", net.services_vswitch_cidr)):
        if cidr:
            b.tagged(f"{name}-{part}-vswitch", "vswitch", tags,
                     protect=part == "services" and services_vswitch_lifecycle(plan).protect)
    b.tagged(f"{name}-sg", "sg", tags)
    b.parts["ingress"].append(V.IngressRule(resource=f"{name}-intra-cluster", direction="ingress", policy="accept",
                                            protocol="all", port_range="-1/-1"))
    b.parts["ingress"] += [V.IngressRule(resource=f"{name}-ssh-{i}", direction="ingress", policy="accept",
                                         protocol="tcp", port_range="22/22", sources=(("cidrIp", cidr),))
                           for i, cidr in enumerate(ssh_rule_cidrs(net))]
    if net.internet_egress:
        b.tagged(f"{name}-nat", "nat", tags)
        b.tagged(f"{name}-nat-eip", "eip", tags)


def _storage(b: _Builder, name: str) -> None:
    plan, st = b.plan, b.plan.storage
    keep = retained(plan).protect
    if st.oss is not None:
        holds = st.checkpoint == "oss" or plan.target == "dlc"
        b.tagged(f"{name}-bucket", "bucket", base_tags(plan, role=ROLE_CHECKPOINT if holds else "stack"),
                 protect=holds and keep)
    if st.cpfs is not None and plan.target == "ecs":
        holds = st.checkpoint == "cpfs"
        b.tagged(f"{name}-cpfs", "nas", base_tags(plan, role=ROLE_CHECKPOINT if holds else "dataset", zone=b.zone),
                 protect=holds and keep)
    if plan.target != "ecs":
        return
    for rank in plan.instance_ranks() if st.data_disk is not None else []:
        _disk(b, f"{name}-data-disk-{rank}", st.data_disk, base_tags(plan, zone=b.zone), protect=False)
    if checkpoint_disks_planned(plan):
        for rank in range(plan.nodes):
            _disk(b, f"{name}-ckpt-disk-{rank}", st.checkpoint_disk,
                  base_tags(plan, role=ROLE_CHECKPOINT, zone=b.zone), protect=keep)


def _disk(b: _Builder, name: str, disk, tags: dict, protect: bool) -> None:
    b.parts["disks"].append(V.Disk(resource=name, label="disk", category=disk.category,
                                   performance_level=disk.performance_level, size_gib=disk.size_gib))
    b.tagged(name, "disk", tags, protect=protect, deleted_with_instance=disk.delete_with_instance)


def _role(b: _Builder, name: str) -> None:
    b.tagged(f"{name}-role", "role", base_tags(b.plan))
    for grant in node_role_grants(b.plan):
        if grant.document is None:
            continue
        _ram_policy(b, f"{name}-{grant.suffix}", grant.document)


def _ram_policy(b: _Builder, name: str, document: dict) -> None:
    b.parts["ram_policies"].append(V.RamPolicy(resource=name, statements=statements(document)))
    b.tagged(name, "policy", base_tags(b.plan))
    b.parts["ram_attachments"].append(V.RamAttachment(resource=name, policy_type="Custom"))


def _planned(tags: dict[str, Any]) -> Optional[Any]:
    return parse_price_text(tags.get(PLANNED_PRICE))


def _cluster(b: _Builder, name: str) -> None:
    plan, st = b.plan, b.plan.storage
    _role(b, f"{name}-identity")
    in_set = bool(deployment_set_layout(plan))
    for rank in plan.instance_ranks():
        node = f"{name}-node-{rank}"
        tags = node_tags(plan, b.zone, rank, DIGEST)
        strategy = plan.node_spot_strategy(rank)
        spot = strategy == "SpotWithPriceLimit"
        b.parts["nodes"].append(V.GpuNode(
            name=node, urn=f"plan:{node}", resource_type=T["instance"], kind="ecs",
            instance_types=(plan.instance_type or "",), training=True, spot=spot, spot_strategy=strategy,
            spot_price_limits={"*": plan.spot_price_limit} if spot and plan.spot_price_limit else {},
            zone=b.zone, high_performance=plan.network.rdma == "erdma", region=plan.region,
            planned_price=_planned(tags)))
        b.parts["instances"].append(V.InstanceSettings(
            resource=node, resource_type=T["instance"], has_deployment_set=in_set,
            deployment_set=V.Unknown(path=("deploymentSetId",)) if in_set else None, spot_strategy=strategy,
            http_endpoint="enabled", http_tokens="required"))
        b.parts["disks"].append(V.Disk(resource=node, label="system disk", category=st.system_disk_category,
                                       performance_level=st.system_disk_performance_level,
                                       size_gib=st.system_disk_gib))
        b.tagged(node, "instance", tags)
    _ram_policy(b, f"{name}-stop-own-instances",
                stop_policy_document(plan.region, [f"(instance {r})" for r in plan.instance_ranks()]))


def _pool(b: _Builder, name: str) -> None:
    """The ESS group, its scale-to-0 rule's RAM policy and the scaling configuration: trainstack's dynamic
    resource (kind: ess-scaling-configuration, trainstack.layout.pool_configuration), read as the policy
    pack reads it (policies/_nodes.py)."""
    plan, pool, st = b.plan, b.plan.spot_pool, b.plan.storage
    assert pool is not None
    b.tagged(f"{name}-group", "group", base_tags(plan, zone=b.zone))
    _ram_policy(b, f"{name}-scale-to-zero", scale_policy_document(plan.region, "(scaling group)"))
    config = f"{name}-config"
    # the scale-to-0 rule's ARI tag is a deploy-time value the engine leaves out at preview: not in the view
    tags = node_tags(plan, b.zone, "pool" if pool.anchor else 0, DIGEST)
    b.parts["nodes"].append(V.GpuNode(
        name=config, urn=f"plan:{config}", resource_type=T["dynamic"], kind="ess",
        instance_types=(plan.instance_type or "",), training=True, count=pool.max_size, spot=True,
        spot_strategy="SpotWithPriceLimit", spot_price_limits={plan.instance_type or "*": pool.price_limit},
        zone=b.zone, high_performance=network_interfaces(plan, "(security group)") is not None, region=plan.region,
        planned_price=_planned(tags)))
    b.parts["instances"].append(V.InstanceSettings(resource=config, resource_type=T["dynamic"],
                                                   spot_strategy="SpotWithPriceLimit", http_endpoint="enabled",
                                                   http_tokens=HTTP_TOKENS_REQUIRED))
    if st.data_disk is not None:
        d = st.data_disk
        b.parts["disks"].append(V.Disk(resource=config, label="data disk 0", category=d.category,
                                       performance_level=d.performance_level, size_gib=d.size_gib))
    b.parts["disks"].append(V.Disk(resource=config, label="system disk", category=st.system_disk_category,
                                   performance_level=st.system_disk_performance_level, size_gib=st.system_disk_gib))
    b.tagged(config, "dynamic", tags)


def _dlc_job(b: _Builder, name: str) -> None:
    i = job_inputs(b.plan)
    spot = bool(i.get("spot"))
    limit = i.get("spot_price_limit")
    price = i.get("on_demand_cny_per_hour")
    b.parts["nodes"].append(V.GpuNode(
        name=name, urn=f"plan:{name}", resource_type=T["dynamic"], kind="dlc",
        instance_types=(i["ecs_spec"],) if i.get("ecs_spec") else (), training=True, count=i["pod_count"],
        spot=spot, spot_strategy=("SpotWithPriceLimit" if limit is not None else "SpotAsPriceGo") if spot else "NoSpot",
        spot_price_limits={"*": limit} if spot and limit else {}, rdma_enabled=i["enable_rdma"],
        gpus_per_pod=i["gpus_per_pod"], region=i["region"], quota_id=i.get("resource_id"),
        planned_price=None if price is None else V.PlannedPrice(cny_per_hour=price, source=i["price_source"])))
