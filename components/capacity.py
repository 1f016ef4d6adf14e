"""An immediate capacity reservation for the plan's nodes (profile ``resources.capacity: reserve``).

What Alibaba says (https://help.aliyun.com/en/ecs/user-guide/overview-of-immediate-capacity-reservation):
it takes effect when created, bills the pay-as-you-go rate of its instances from then on, used or
not, until it is released; it covers pay-as-you-go instances only, never spot; releasing it leaves
the instances it held running. An elasticity assurance (prepaid, not releasable by hand) is not
offered: a reservation trainstack cannot release would outlive `pulumi destroy` and bill on.

``alicloud.ecs.CapacityReservation`` (alicloud_ecs_capacity_reservation, terraform-provider-alicloud
ace5bcf8 alicloud/resource_alicloud_ecs_capacity_reservation.go) on day two:

- ``instance_amount`` (the plan's nodes): changed in place (ModifyCapacityReservation, :285-305);
- ``description``, ``end_time``/``end_time_type``, ``capacity_reservation_name``, ``tags``: in place;
- ``instance_type``, ``zone_ids``, ``match_criteria``, ``platform``, ``resource_group_id``: ForceNew (:68-116), so
  a new type or zone releases this reservation first (``delete_before_replace``: never two billing
  at once) and makes a new one;
- ``pulumi destroy``: ReleaseCapacityReservation (:331-372). Never protected, never retained.

``match_criteria="Open"``: the nodes, created after it (the node vSwitch waits for it,
components/network.py), match it by type, zone and pay-as-you-go billing with their default
private pool option (RunInstances ``PrivatePoolOptions.MatchCriteria`` Open: "the system selects a
matching open private pool ... if none, the public pool", AlibabaCloudDocs/ecs@322eaab8
intl.en-US/API Reference/Instances/RunInstances.md:295-298), so no node input changes. A
``Target`` pool would bind the nodes to its id, and StartInstance of a node stopped without charge
(how trainstack ends a job) fails once that pool is released or used up
(ModifyInstanceAttachmentAttributes, https://www.alibabacloud.com/help/en/ecs/developer-reference/api-modifyinstanceattachmentattributes);
the price of Open is that another pay-as-you-go instance of the same type and zone in the account may
take a slot (docs/capacity.md). With ``trainstack:autoReleaseAt`` the reservation ends then too
(``end_time_type="Limited"``), like the nodes.
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_alicloud as alicloud

from trainstack.plan import Plan
from trainstack.tags import base_tags

#: CreateCapacityReservation PrivatePoolOptions.Name: 2-128 characters, starting with a letter.
NAME_MAX = 128


def reservation_name(plan: Plan) -> str:
    return f"trainstack-{plan.name}"[:NAME_MAX]


class CapacityReservation(pulumi.ComponentResource):
    """``reservation``: the ``ecs.CapacityReservation`` holding ``plan.capacity.reservation``'s instances."""

    reservation: alicloud.ecs.CapacityReservation

    def __init__(self, name: str, plan: Plan, zone: str, auto_release_time: Optional[str] = None,
                 opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("trainstack:index:CapacityReservation", name, None, opts)
        assert plan.capacity is not None and plan.capacity.reservation is not None
        res = plan.capacity.reservation
        ends = {"end_time_type": "Limited", "end_time": auto_release_time} if auto_release_time else {
            "end_time_type": "Unlimited"}
        self.reservation = alicloud.ecs.CapacityReservation(
            f"{name}-reservation", capacity_reservation_name=reservation_name(plan), instance_type=res.instance_type,
            instance_amount=res.instances, zone_ids=[zone], match_criteria="Open", platform="linux",
            description=f"trainstack {plan.name}: capacity for {res.instances} x {res.instance_type} (on-demand)",
            tags=base_tags(plan, role="capacity", zone=zone), **ends,
            opts=pulumi.ResourceOptions(parent=self, protect=False, retain_on_delete=False, delete_before_replace=True))
        self.register_outputs({"id": self.reservation.id, "instance_type": res.instance_type,
                               "instances": res.instances, "zone": zone})


def reserve(name: str, plan: Plan, zone: str, auto_release_time: Optional[str],
            opts: pulumi.ResourceOptions) -> Optional[CapacityReservation]:
    """The stack's reservation when its plan has one (ECS plans with ``resources.capacity: reserve``)."""
    if plan.target != "ecs" or plan.capacity is None or plan.capacity.reservation is None:
        return None
    return CapacityReservation(f"{name}-capacity", plan, zone, auto_release_time, opts=opts)
