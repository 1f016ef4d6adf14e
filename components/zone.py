"""The zone a stack deploys to, as a plain string at program time (tags and policies read it at preview).

Pinned (profile ``zone`` or ``trainstack:zone``, ``Plan.capacity.zone_pinned``, or a plan whose zone
is not its fallback order's own row, i.e. set on purpose): that zone, no lookup. Otherwise (trainstack.layout.capacity.deploy_zone decides):

1. **the zone the stack already has**: its node vSwitch, looked up by the stack's tags and the node
   vSwitch's name (``alicloud.vpc.getSwitches``: DescribeVSwitches with a Tag filter and a
   client-side name regex, terraform-provider-alicloud ace5bcf8
   alicloud/data_source_alicloud_vswitches.go:160-240). A plan name is one stack per account (its
   RAM role name is account-wide, components/identity.py), so the name and the tags find this
   stack's vSwitch; once it exists, no stock change or catalog refresh moves the stack;
2. on a first deploy, **the first zone of the plan's fallback order with stock** for the planned
   type, pay-as-you-go or spot as planned (an elastic plan needs both): ``alicloud.ecs.getInstanceTypes``
   lists a type's zones from DescribeAvailableResource (DestinationResource InstanceType, the
   charge type and spot strategy given) and drops every zone where it is ``SoldOut``
   (alicloud/data_source_alicloud_instance_types.go:253-283, service_alicloud_ecs.go:418-526 at
   ace5bcf8). ``alicloud.getZones`` is not a stock check: it asks DescribeAvailableResource at the
   *zone* level and filters types by DescribeZones' offering lists
   (alicloud/data_source_alicloud_zones.go:403-437). It is still asked when the catalog knows no zone
   for the type (the zones where a vSwitch can be created), and CPFS plans keep the zones NAS offers
   CPFS in.

Plans without a fallback order (PAI-DLC, hand-made plans) keep the earlier rule: their zone, or the
first zone that offers what they need.
"""

from __future__ import annotations

import re
from typing import Optional

import pulumi
import pulumi_alicloud as alicloud

from trainstack.errors import CloudApiError
from trainstack.layout.capacity import deploy_zone, planned_zones
from trainstack.plan import Plan
from trainstack.tags import NAME, ROLE

#: The tag role every Network resource carries (components/network.py: ``base_tags(plan, role="network")``).
NETWORK_ROLE = "network"


def node_vswitch_pattern(plan: Plan) -> str:
    """The node vSwitch's name, ``<name>-<zone>`` (not the ``-eri-``, ``-pool-`` or ``-services-`` ones)."""
    return f"^{re.escape(plan.name)}-{re.escape(plan.region)}-[a-z0-9]+$"


def _invoke(what: str, call):
    try:
        return call()
    except Exception as exc:  # noqa: BLE001 - the provider's error text, as one clear exit-5 error
        detail = " ".join(str(exc).split())[:600]
        raise CloudApiError(f"{what} failed at deploy time: {detail}",
                            hint="check credentials and the region; or pin the zone: "
                                 "`pulumi config set trainstack:zone <zone>`") from None


def deployed_zones(plan: Plan, opts: Optional[pulumi.InvokeOptions]) -> list[str]:
    result = _invoke("looking up the stack's node vSwitch (DescribeVSwitches)", lambda: alicloud.vpc.get_switches(
        tags={NAME: plan.name, ROLE: NETWORK_ROLE}, name_regex=node_vswitch_pattern(plan), opts=opts))
    return sorted({v.zone_id for v in (result.vswitches or []) if v.zone_id})


def stock_zones(plan: Plan, opts: Optional[pulumi.InvokeOptions]) -> set[str]:
    """Zones where the planned type is not sold out, for every pricing the plan's nodes use."""
    strategies = {plan.node_spot_strategy(r) for r in plan.instance_ranks()}
    if plan.spot_pool is not None:
        strategies.add(plan.spot_strategy)
    zones: Optional[set[str]] = None
    for strategy in sorted(strategies):
        result = _invoke(f"stock lookup of {plan.instance_type} ({strategy}, DescribeAvailableResource)",
                         lambda s=strategy: alicloud.ecs.get_instance_types(
                             instance_type=plan.instance_type, instance_charge_type="PostPaid", spot_strategy=s,
                             opts=opts))
        found = {z for t in (result.instance_types or []) if t.id == plan.instance_type
                 for z in (t.availability_zones or [])}
        zones = found if zones is None else zones & found
    return zones or set()


def offered_zones(plan: Plan, opts: Optional[pulumi.InvokeOptions]) -> list[str]:
    """Zones that offer a vSwitch (and the type) for a plan whose zones the catalog does not know."""
    args: dict = {"available_resource_creation": "VSwitch"}
    if plan.instance_type:
        args["available_instance_type"] = plan.instance_type
        args["instance_charge_type"] = "PostPaid"
    if plan.spot:
        args["spot_strategy"] = plan.spot_strategy
    return [z.id for z in (alicloud.get_zones(**args, opts=opts).zones or []) if z.id]


def cpfs_zones(plan: Plan, opts: Optional[pulumi.InvokeOptions]) -> Optional[set[str]]:
    if plan.storage.cpfs is None or plan.target != "ecs":
        return None
    return {z.zone_id for z in (alicloud.nas.get_zones(file_system_type="cpfs", opts=opts).zones or [])}


def resolve_zone(plan: Plan, opts: Optional[pulumi.InvokeOptions] = None) -> str:
    """The zone every component, tag and the bootstrap of this stack use (see the module docstring)."""
    cap = plan.capacity
    if plan.zone and (cap is None or cap.zone_pinned or plan.zone != _planned_row_zone(cap)):
        return plan.zone
    if cap is None or not plan.instance_type:
        return _first_offered(plan, opts)
    candidates = planned_zones(cap, plan.instance_type)
    deployed = deployed_zones(plan, opts)
    if deployed:
        return deploy_zone(plan.name, plan.region, candidates, deployed, ())
    candidates = candidates or offered_zones(plan, opts)
    return deploy_zone(plan.name, plan.region, candidates, (), stock_zones(plan, opts), cpfs_zones(plan, opts))


def _planned_row_zone(cap) -> Optional[str]:
    """The zone of the fallback order's own row; a plan whose zone differs was given its zone on purpose."""
    return next((c.zone for c in cap.candidates if c.planned), None)


def _first_offered(plan: Plan, opts: Optional[pulumi.InvokeOptions]) -> str:
    zones = offered_zones(plan, opts)
    cpfs = cpfs_zones(plan, opts)
    if cpfs is not None:
        zones = [z for z in zones if z in cpfs]
    if not zones:
        what = plan.instance_type or "a vSwitch"
        raise CloudApiError(
            f"no zone in {plan.region} offers {what}"
            + (" together with CPFS" if plan.storage.cpfs is not None else "") + " right now",
            hint="pin a zone with `pulumi config set trainstack:zone <zone>` or choose another "
                 "instance type; `trainstack resolve` lists the alternatives")
    return zones[0]
