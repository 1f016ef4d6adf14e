"""A self-healing spot pool: one ESS scaling group that keeps the plan's spot nodes running.

Built by ``TrainingStack`` when the Plan has ``spot_pool`` (profile ``resources.self_healing``):
instead of ``Cluster`` for a 1-node plan; for a multi-node plan (``spot_pool.anchor``) beside a
``Cluster`` of node 0 alone (on-demand, fixed IP, the torchrun rendezvous host), the pool holding
nodes 1.. in the pool vSwitch, all launched from one scaling configuration (rank 1's bootstrap: torchrun
elastic gives each its rank). What it declares (pulumi-alicloud 4.0.0 ``ess.ScalingGroup`` /
``ess.ScalingConfiguration``; every argument checked against the installed source and
terraform-provider-alicloud ace5bcf8 resource_alicloud_ess_scaling_configuration.go):

- ``ess.ScalingGroup``: ``min_size = max_size = desired_capacity`` = the pool's size in the plan's
  vSwitch (1 node) or the pool vSwitch (several: ESS picks the addresses, never node 0's),
  ``multi_az_policy="COST_OPTIMIZED"`` (the policy under which ``compensate_with_on_demand`` and
  the on-demand base apply), ``on_demand_base_capacity`` from the plan (0: all spot),
  ``on_demand_percentage_above_base_capacity=0``, ``spot_instance_remedy=True`` (ESS starts a
  replacement when a reclaim notice arrives), ``compensate_with_on_demand`` from the plan
  (``spot: allow`` only), explicit removal policies, no deletion protection, ``release`` scaling
  policy, tags with ``trainstack:name`` and ``trainstack:zone``.
- ``ess.ScalingConfiguration`` (what every node of the group is made of, as ``Cluster`` makes an
  ``ecs.Instance``): the planned type, ``SpotWithPriceLimit`` with the plan's ESS bid
  (``spot_price_limits``: 2 decimals at most, rounded down), the image, the cluster security
  group, no public bandwidth, metadata on (``http_endpoint``; ESS exposes no ``http_tokens``,
  the bootstrap uses IMDSv2 tokens anyway), encrypted ESSD system and data disks, the node RAM
  role by name (``role_name``: attached at launch), the same bootstrap as node 0 of the instance
  path (rank 1's for a multi-node pool), no ``network_interfaces`` (ESS refuses them next to the
  security groups the provider requires at create, so a multi-node self-healing plan talks TCP:
  trainstack.layout.network), and the training-node tags of ``trainstack/tags.py``
  (``trainstack:role=training``, ``trainstack:zone``, ``trainstack:gpu-model``,
  ``trainstack:gpus-per-node``, rank 0 or ``pool``, and
  ``trainstack:job-settings``: the running node keeps the settings it was launched with, since a
  changed configuration reaches only the next node ESS launches).
  ``active`` + ``enable`` put the group in service; ``force_delete`` lets ``pulumi destroy`` delete
  this last configuration together with its group.

Billing: the pool's node is never stopped by the bootstrap (a stopped node would fail the ESS
health check and be replaced, rerunning the job); it runs until the stack is destroyed. The node
role therefore gets no ``StopInstance`` permission at all (nothing to widen to ``*``).
"""

from __future__ import annotations

from typing import Optional, Sequence

import pulumi
import pulumi_alicloud as alicloud

from trainstack.plan import Plan

from .network import Network
from trainstack.tags import MAX_TAGS, base_tags, node_tags, within_limit

#: ESS removal order when a group has to shrink (a 1-node pool only shrinks on destroy).
REMOVAL_POLICIES = ["OldestScalingConfiguration", "OldestInstance"]


class SpotPool(pulumi.ComponentResource):
    """The ESS scaling group and its scaling configuration of a self-healing spot plan."""

    group: alicloud.ess.ScalingGroup
    configuration: alicloud.ess.ScalingConfiguration

    def __init__(self, name: str, plan: Plan, network: Network, image_id: pulumi.Input[str],
                 user_data: pulumi.Input[str], role_name: pulumi.Input[str],
                 opts: Optional[pulumi.ResourceOptions] = None, *,
                 depends_on: Sequence[pulumi.Resource] = (), job_settings_digest: pulumi.Input[str] = None):
        super().__init__("trainstack:index:SpotPool", name, None, opts)
        pool, st = plan.spot_pool, plan.storage
        assert pool is not None and plan.zone is not None, "TrainingStack fills in the zone"
        zone = plan.zone
        node_name = plan.pool_node_name() if pool.anchor else plan.node_names()[0]
        vswitch = network.pool_vswitch if pool.anchor else network.vswitch
        assert vswitch is not None, "the rule book gives a multi-node pool its vSwitch"
        child = pulumi.ResourceOptions(parent=self)

        self.group = alicloud.ess.ScalingGroup(
            f"{name}-group", scaling_group_name=f"{plan.name[:54]}-spot-pool",
            min_size=pool.min_size, max_size=pool.max_size, desired_capacity=pool.max_size,
            vswitch_ids=[vswitch.id], multi_az_policy=pool.multi_az_policy,
            on_demand_base_capacity=pool.on_demand_base, on_demand_percentage_above_base_capacity=0,
            spot_instance_remedy=True, compensate_with_on_demand=pool.compensate_with_on_demand,
            removal_policies=list(REMOVAL_POLICIES), scaling_policy="release", group_deletion_protection=False,
            tags=within_limit(base_tags(plan, zone=zone), MAX_TAGS, "a scaling group"), opts=child)

        args: dict = dict(
            scaling_group_id=self.group.id, scaling_configuration_name=f"{plan.name[:54]}-spot-node",
            instance_name=node_name, host_name=node_name,
            instance_description=f"trainstack {plan.name}: self-healing spot GPU node",
            instance_type=plan.instance_type, image_id=image_id,
            spot_strategy="SpotWithPriceLimit",
            spot_price_limits=[alicloud.ess.ScalingConfigurationSpotPriceLimitArgs(
                instance_type=plan.instance_type, price_limit=pool.price_limit)],
            spot_duration=plan.spot_duration_hours,
            security_group_ids=[network.security_group.id], internet_max_bandwidth_out=0,
            http_endpoint="enabled",
            system_disk_category=st.system_disk_category,
            system_disk_performance_level=st.system_disk_performance_level,
            system_disk_size=st.system_disk_gib, system_disk_encrypted=True, system_disk_name=f"{node_name}-system",
            role_name=role_name, user_data=user_data,
            tags=node_tags(plan, zone, "pool" if pool.anchor else 0, job_settings_digest),
            active=True, enable=True, force_delete=True,
        )

        disk = st.data_disk
        if disk is not None:
            args["data_disks"] = [alicloud.ess.ScalingConfigurationDataDiskArgs(
                category=disk.category, performance_level=disk.performance_level, size=disk.size_gib,
                encrypted=True, delete_with_instance=True, name=f"{node_name}-data")]
        if plan.network.key_pair:
            args["key_name"] = plan.network.key_pair
        self.configuration = alicloud.ess.ScalingConfiguration(
            f"{name}-config", opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)), **args)

        self.register_outputs({"scaling_group_id": self.group.id,
                               "scaling_configuration_id": self.configuration.id})
