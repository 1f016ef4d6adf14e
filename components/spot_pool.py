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
- the scaling configuration (what every node of the group is made of, as ``Cluster`` makes an
  ``ecs.Instance``): ``components.ess_pool.EssScalingConfiguration`` over the ESS SDK, since the
  provider's ``ess.ScalingConfiguration`` cannot ask for eRDMA or metadata tokens
  (trainstack.layout.pool_configuration): the planned type, ``SpotWithPriceLimit`` with the plan's ESS
  bid, the image, no public bandwidth, ``httpTokens=required`` (IMDSv2 only), on eRDMA plans a
  Standard primary interface and a HighPerformance secondary one (an ERI) each in the cluster security
  group, else that security group, encrypted ESSD disks, the node RAM role, the bootstrap (rank 1's for
  a multi-node pool), and the training-node tags with the job-settings digest and the scale-to-0 rule.
- ``ess.ScalingRule`` ``TotalCapacity 0``: the one rule the node role may execute (``ess:ExecuteScalingRule``
  on this group only, trainstack.layout.identity): when the job ends a pool node scales the pool to 0.
  So the group's ``min_size`` is 0 and ``desired_capacity`` the pool's size; once a node scaled it down,
  state and reality differ until ``pulumi up --refresh`` sets the size again (docs/self-healing.md).

Billing: a pool node is never stopped (a stopped node would fail the ESS health check and be
replaced); at the job's end it executes the scale-to-0 rule and ESS releases the pool's nodes.
"""

from __future__ import annotations

from typing import Optional, Sequence

import json

import pulumi
import pulumi_alicloud as alicloud

from trainstack.layout.identity import scale_policy_document
from trainstack.layout.lifecycle import ram_policy_rotate_strategy
from trainstack.layout.pool_configuration import configuration_inputs
from trainstack.plan import Plan

from .ess_pool import EssScalingConfiguration
from .network import Network
from trainstack.tags import MAX_TAGS, base_tags, within_limit

#: ESS removal order when a group has to shrink (a 1-node pool only shrinks on destroy).
REMOVAL_POLICIES = ["OldestScalingConfiguration", "OldestInstance"]


class SpotPool(pulumi.ComponentResource):
    """The ESS scaling group and its scaling configuration of a self-healing spot plan."""

    group: alicloud.ess.ScalingGroup
    scale_to_zero: alicloud.ess.ScalingRule
    configuration: EssScalingConfiguration

    def __init__(self, name: str, plan: Plan, network: Network, image_id: pulumi.Input[str],
                 user_data: pulumi.Input[str], role_name: pulumi.Input[str],
                 opts: Optional[pulumi.ResourceOptions] = None, *,
                 depends_on: Sequence[pulumi.Resource] = (), job_settings_digest: pulumi.Input[str] = None):
        super().__init__("trainstack:index:SpotPool", name, None, opts)
        pool, st = plan.spot_pool, plan.storage
        assert pool is not None and plan.zone is not None, "TrainingStack fills in the zone"
        zone = plan.zone
        vswitch = network.pool_vswitch if pool.anchor else network.vswitch
        assert vswitch is not None, "the rule book gives a multi-node pool its vSwitch"
        child = pulumi.ResourceOptions(parent=self)

        self.group = alicloud.ess.ScalingGroup(
            f"{name}-group", scaling_group_name=f"{plan.name[:54]}-spot-pool",
            min_size=0, max_size=pool.max_size, desired_capacity=pool.max_size,  # min 0: the scale-to-0 rule
            vswitch_ids=[vswitch.id], multi_az_policy=pool.multi_az_policy,
            on_demand_base_capacity=pool.on_demand_base, on_demand_percentage_above_base_capacity=0,
            spot_instance_remedy=True, compensate_with_on_demand=pool.compensate_with_on_demand,
            removal_policies=list(REMOVAL_POLICIES), scaling_policy="release", group_deletion_protection=False,
            tags=within_limit(base_tags(plan, zone=zone), MAX_TAGS, "a scaling group"), opts=child)

        # TotalCapacity 0 (resource_alicloud_ess_scaling_rule.go at ace5bcf8: adjustment_type/_value update in place)
        self.scale_to_zero = alicloud.ess.ScalingRule(
            f"{name}-scale-to-zero", scaling_group_id=self.group.id, scaling_rule_name=f"{plan.name[:50]}-scale-to-0",
            scaling_rule_type="SimpleScalingRule", adjustment_type="TotalCapacity", adjustment_value=0, opts=child)
        region = plan.region
        self.scale_policy = alicloud.ram.Policy(
            f"{name}-scale-to-zero", policy_name=f"{plan.name[:50]}-scale-to-0",
            policy_document=self.group.id.apply(lambda gid: json.dumps(scale_policy_document(region, gid))),
            description=f"trainstack {plan.name}: pool nodes may execute the scale-to-0 rule of their group only",
            rotate_strategy=ram_policy_rotate_strategy(), tags=base_tags(plan), opts=child)
        self.scale_attachment = alicloud.ram.RolePolicyAttachment(
            f"{name}-scale-to-zero", role_name=role_name, policy_name=self.scale_policy.policy_name,
            policy_type="Custom", opts=child)
        inputs = configuration_inputs(plan, zone=zone, scaling_group_id=self.group.id, image_id=image_id,
                                      security_group_id=network.security_group.id, user_data=user_data,
                                      role_name=role_name, job_settings_digest=job_settings_digest,
                                      scale_rule=self.scale_to_zero.ari)
        self.configuration = EssScalingConfiguration(
            f"{name}-config", inputs,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[*depends_on, self.scale_attachment]))

        self.register_outputs({"scaling_group_id": self.group.id, "scale_to_zero_rule": self.scale_to_zero.ari,
                               "scaling_configuration_id": self.configuration.id})
