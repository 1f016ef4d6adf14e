"""TrainingStack: the whole training environment for one Plan.

ECS plans: Network + Storage + Image + Cluster, or, when the plan has ``spot_pool`` (profile
``resources.self_healing``), a ``components.spot_pool.SpotPool`` (an ESS scaling group): instead
of the Cluster on a 1-node plan (with the node role), beside a Cluster of node 0 alone on a
multi-node plan (the pool's nodes share the Cluster's node role). DLC plans: Network + Storage (whatever the plan
has; for DLC that is the OSS bucket) + ``components.dlc.DlcTraining``, and no ECS nodes.

Unless the zone is pinned, it is looked up once here (components/zone.py: the stack's existing
node vSwitch, else the first zone of the plan's fallback order with stock; plain invokes) and every
component, tag and the bootstrap see that one plain value (``plan.zone`` is filled in). A capacity
reservation (``resources.capacity: reserve``, components/capacity.py) is declared next: the nodes'
vSwitches, and so the nodes, wait for it. So is the
stack bucket's name: its stack-unique part comes from the account (``get_caller_identity``), the
Pulumi project and stack and ``trainstack:storageGeneration`` (trainstack.layout.storage).

ECS stacks write the job settings channel (components/job_settings.py) before the nodes, whose
``trainstack:job-settings`` tag carries its digest.
"""

from __future__ import annotations

from typing import Any, Optional

import pulumi
import pulumi_alicloud as alicloud

from trainstack.layout.storage import StackIdentity, with_stack_bucket  # noqa: F401 (re-exported)
from trainstack.plan import Plan
from trainstack.rules import check_plan
from trainstack.stack_config import check_auto_release_time

from .capacity import CapacityReservation, reserve
from .cluster import Cluster, user_data
from .identity import NodeRole
from .image import ImageChoice, choose_image
from .job_settings import JobSettingsObject
from .network import Network, resolve_zone
from .spot_pool import SpotPool
from .storage import Storage


class TrainingStack(pulumi.ComponentResource):
    plan: Plan
    zone: str
    network: Network
    storage: Storage
    image: Optional[ImageChoice]
    capacity: Optional[CapacityReservation]
    cluster: Optional[Cluster]
    spot_pool: Optional[SpotPool]
    nodes: list
    dlc: Any

    def __init__(self, name: str, plan: Plan, opts: Optional[pulumi.ResourceOptions] = None, *,
                 auto_release_time: Optional[str] = None, storage_generation: int = 1):
        check_plan(plan)  # the rule book: a plan it accepts never fails in the components below
        super().__init__("trainstack:index:TrainingStack", name, None, opts)
        lookups = pulumi.InvokeOptions(parent=self)
        zone = resolve_zone(plan, lookups)
        if plan.zone != zone:
            plan = plan.model_copy(update={"zone": zone})
        plan = with_stack_bucket(plan, stack_identity(plan, lookups, storage_generation))
        self.plan, self.zone = plan, zone
        child = pulumi.ResourceOptions(parent=self)

        # the reservation first (resources.capacity: reserve): the nodes' vSwitches, and so the nodes, wait for it
        self.capacity = reserve(name, plan, zone, auto_release_time, child)
        self.network = Network(f"{name}-network", plan, zone, opts=child,
                               reservation=self.capacity.reservation if self.capacity else None)
        services = self.network.services_vswitch.id if self.network.services_vswitch else None
        self.storage = Storage(f"{name}-storage", plan, zone, vpc_id=self.network.vpc.id,
                               services_vswitch_id=services, opts=child)
        self.image = self.cluster = self.spot_pool = self.dlc = self.job_settings = None
        self.nodes = []
        if plan.target == "ecs":
            assert self.storage.bucket is not None
            self.job_settings = JobSettingsObject(f"{name}-job-settings", plan, self.storage.bucket.bucket,
                                                  self.storage.cpfs_mount_address, opts=child)
        if plan.target == "ecs" and plan.elastic:
            assert self.job_settings is not None
            self.image = choose_image(plan, lookups)
            self.cluster = Cluster(f"{name}-cluster", plan, zone, self.network, self.storage, self.image.image_id,
                                   self.job_settings, auto_release_time=auto_release_time, opts=child)
            self.nodes = self.cluster.nodes
            # its own name: a 1-node pool grown to several nodes gets a new group, never the old one's node
            self.spot_pool = SpotPool(
                f"{name}-elastic-pool", plan, self.network, self.image.image_id, user_data(plan, 1),
                self.cluster.identity.role.role_name, opts=child,
                depends_on=[*self.cluster.identity.ready, self.job_settings.object],
                job_settings_digest=self.job_settings.digest)
        elif plan.target == "ecs" and plan.spot_pool is not None:
            self.image = choose_image(plan, lookups)
            if check_auto_release_time(auto_release_time):
                pulumi.log.warn(f"{plan.name}: trainstack:autoReleaseAt does not apply to a self-healing spot pool "
                                "(ESS would replace the released node); destroy the stack instead", resource=self)
            identity = NodeRole(f"{name}-pool-identity", plan, opts=child)
            assert self.job_settings is not None
            self.spot_pool = SpotPool(
                f"{name}-pool", plan, self.network, self.image.image_id,
                user_data(plan, 0), identity.role.role_name, opts=child,
                depends_on=[*identity.ready, self.job_settings.object], job_settings_digest=self.job_settings.digest)
        elif plan.target == "ecs":
            assert self.job_settings is not None
            self.image = choose_image(plan, lookups)
            self.cluster = Cluster(f"{name}-cluster", plan, zone, self.network, self.storage, self.image.image_id,
                                   self.job_settings, auto_release_time=auto_release_time, opts=child)
            self.nodes = self.cluster.nodes
        else:
            from components.dlc import DlcTraining  # written alongside; only DLC stacks need it

            self.dlc = DlcTraining(name, plan=plan, vpc_id=self.network.vpc.id, vswitch_id=self.network.vswitch.id,
                                   security_group_id=self.network.security_group.id,
                                   opts=pulumi.ResourceOptions(parent=self))

        self.outputs = stack_outputs(self)
        self.register_outputs(self.outputs)


def stack_identity(plan: Plan, opts: pulumi.InvokeOptions, generation: int) -> StackIdentity:
    """Who deploys this stack (plain values at program time: an invoke and the Pulumi context)."""
    account = None
    if plan.storage.oss is not None and plan.storage.oss.name_from_stack:
        account = getattr(alicloud.get_caller_identity(opts=opts), "account_id", None) or None
    return StackIdentity(region=plan.region, account_id=account, project=pulumi.get_project(),
                         stack=pulumi.get_stack(), generation=generation)


def stack_outputs(stack: TrainingStack) -> dict[str, Any]:
    """What `pulumi stack output` shows (and the offline preview's ``exports``)."""
    plan = stack.plan
    is_ecs = plan.target == "ecs"
    fixed_ips = is_ecs and (plan.spot_pool is None or plan.elastic)  # a pool node's IP is chosen by ESS
    summary = plan.summary()
    out = {
        "target": plan.target,
        "instance_type": plan.instance_type,
        "gpu_model": plan.gpu_model,
        "nodes": plan.nodes,  # ECS nodes, or DLC pods
        "node_names": plan.node_names() if is_ecs else [],
        "node_private_ips": [plan.node_private_ips()[r] for r in plan.instance_ranks()] if fixed_ips else [],
        "node_ids": [n.id for n in stack.nodes],
        "zone": stack.zone,
        "image_id": stack.image.image_id if stack.image else None,
        "mount_points": stack.storage.mount_points,
        "oss_bucket": plan.storage.oss.bucket if plan.storage.oss else None,
        "oss_internal_endpoint": plan.storage.oss.internal_endpoint if plan.storage.oss else None,
        "cpfs_id": stack.storage.cpfs.id if stack.storage.cpfs else None,
        "vpc_id": stack.network.vpc.id,
        "hourly_cost_cny": plan.hourly_cost_cny,
        "estimated_hours": plan.estimated_hours,
        "total_cost_cny": plan.total_cost_cny,
        "labels": list(plan.labels),
        "plan_summary": summary,
    }
    if stack.spot_pool is not None:
        out["scaling_group_id"] = stack.spot_pool.group.id
    if stack.job_settings is not None:
        out["job_settings_digest"] = stack.job_settings.digest
    if stack.capacity is not None:
        out["capacity_reservation_id"] = stack.capacity.reservation.id
    return out
