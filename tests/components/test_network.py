"""Network: where the nodes live and who can reach them."""

import pytest

from plan_factory import dlc_plan, hand_edited, multi_node_erdma_plan, single_gpu_lora_plan
from trainstack.errors import CloudApiError, InfeasibleError, InputError

SG_RULE = "ecs/securityGroupRule:SecurityGroupRule"


def _with_network(plan, **net):
    return plan.model_copy(update={"network": plan.network.model_copy(update=net)})


def test_vpc_and_vswitch_use_the_planned_cidrs_and_zone(engine):
    plan = single_gpu_lora_plan()
    engine.declare(plan)
    vpc = engine.one("vpc/network:Network")
    vsw = engine.one("vpc/switch:Switch")
    assert vpc.inputs["cidrBlock"] == "10.0.0.0/16"
    assert vsw.inputs["cidrBlock"] == "10.0.0.0/20"
    assert vsw.inputs["zoneId"] == plan.zone
    assert vsw.inputs["vpcId"] == "network-llama3-8b-lora-network-vpc"


def test_nodes_reach_each_other_through_the_group_itself_not_a_cidr(engine):
    engine.declare(multi_node_erdma_plan())
    sg = engine.one("ecs/securityGroup:SecurityGroup")
    rules = engine.of_type(SG_RULE)
    intra = [r for r in rules if r.inputs.get("sourceSecurityGroupId")]
    assert len(intra) == 1
    rule = intra[0].inputs
    assert rule["sourceSecurityGroupId"] == rule["securityGroupId"] == f"securitygroup-{sg.name}"
    assert rule["type"] == "ingress" and rule["ipProtocol"] == "all" and "cidrIp" not in rule


def test_no_ssh_rule_unless_cidrs_are_declared(engine):
    engine.declare(single_gpu_lora_plan())
    assert not [r for r in engine.of_type(SG_RULE) if r.inputs.get("portRange") == "22/22"]
    assert all("cidrIp" not in r.inputs for r in engine.of_type(SG_RULE))


def test_ssh_only_from_the_declared_cidrs(engine):
    engine.declare(_with_network(single_gpu_lora_plan(), ssh_cidrs=("203.0.113.0/24", "198.51.100.7/32")))
    ssh = [r.inputs for r in engine.of_type(SG_RULE) if r.inputs.get("cidrIp")]
    assert sorted(r["cidrIp"] for r in ssh) == ["198.51.100.7/32", "203.0.113.0/24"]
    assert all(r["portRange"] == "22/22" and r["ipProtocol"] == "tcp" and r["type"] == "ingress" for r in ssh)


@pytest.mark.parametrize("cidr", ["0.0.0.0/0", "0.0.0.0/0.0.0.0"])
def test_ssh_from_the_whole_internet_is_refused(cidr):
    # the profile refuses it, so no plan (and no security group rule) ever carries it
    with pytest.raises(InputError) as err:
        single_gpu_lora_plan(profile={"access": {"ssh_cidrs": [cidr]}})
    assert "whole internet" in "\n".join(err.value.lines())


def test_no_nat_gateway_or_public_address_without_internet_egress(engine):
    engine.declare(multi_node_erdma_plan())
    for token in ("vpc/natGateway:NatGateway", "ecs/eipAddress:EipAddress", "vpc/snatEntry:SnatEntry",
                  "ecs/eipAssociation:EipAssociation"):
        assert engine.of_type(token) == []


def test_internet_egress_goes_through_nat_with_snat_for_the_vswitch(engine):
    """The gateway takes a random address: it sits in the services vSwitch, never in the nodes'
    fixed-IP one; SNAT serves the nodes' vSwitch."""
    engine.declare(single_gpu_lora_plan(profile={"network": {"internet_egress": True}}))
    nat = engine.one("vpc/natGateway:NatGateway")
    eip = engine.one("ecs/eipAddress:EipAddress")
    assoc = engine.one("ecs/eipAssociation:EipAssociation")
    snat = engine.one("vpc/snatEntry:SnatEntry")
    assert nat.inputs["natType"] == "Enhanced" and nat.inputs["networkType"] == "internet"
    assert nat.inputs["vswitchId"] == "switch-llama3-8b-lora-network-services-vswitch"
    assert assoc.inputs == {"allocationId": f"eipaddress-{eip.name}", "instanceId": f"natgateway-{nat.name}",
                            "instanceType": "Nat"}
    assert snat.inputs["snatTableId"] == f"stb-{nat.name}"
    assert snat.inputs["sourceVswitchId"] == "switch-llama3-8b-lora-network-vswitch"
    assert snat.inputs["snatIp"] == "47.106.0.10"
    assert assoc.urn in snat.dependencies  # SNAT only once the EIP is on the gateway
    # the nodes themselves still get no public IP
    assert engine.one("ecs/instance:Instance").inputs["internetMaxBandwidthOut"] == 0


# ---- the zone (components/zone.py) ---------------------------------------------------------------------

GET_ZONES = "alicloud:index/getZones:getZones"
STOCK = "alicloud:ecs/getInstanceTypes:getInstanceTypes"
SWITCHES = "alicloud:vpc/getSwitches:getSwitches"
A10 = "ecs.gn7i-c8g1.2xlarge"


def node_vswitches(engine) -> list[dict]:
    """What getSwitches finds after ``engine``'s deploy: its vSwitches as the cloud would list them."""
    return [{"vswitchName": s.inputs["vswitchName"], "zoneId": s.inputs["zoneId"], "tags": s.inputs["tags"]}
            for s in engine.of_type("vpc/switch:Switch")]


def test_a_pinned_zone_needs_no_lookup(engine):
    plan = single_gpu_lora_plan(profile={"zone": "cn-shenzhen-f"})
    assert plan.capacity.zone_pinned
    engine.declare(plan)
    assert engine.mocks.calls == [c for c in engine.mocks.calls if c[0] not in (GET_ZONES, STOCK, SWITCHES)]
    assert engine.one("vpc/switch:Switch").inputs["zoneId"] == "cn-shenzhen-f"


def test_first_deploy_takes_the_first_zone_of_the_fallback_order_with_stock(engine_factory):
    plan = single_gpu_lora_plan()
    assert [c.zone for c in plan.capacity.candidates if c.instance_type == A10] == ["cn-shenzhen-e", "cn-shenzhen-f"]
    engine = engine_factory(stock={"NoSpot": ["cn-shenzhen-f"]})
    engine.declare(plan)
    (lookup,) = engine.invokes(STOCK)
    assert lookup["instanceType"] == A10 and lookup["instanceChargeType"] == "PostPaid"
    assert lookup["spotStrategy"] == "NoSpot"
    (switches,) = engine.invokes(SWITCHES)
    assert switches["tags"] == {"trainstack:name": plan.name, "trainstack:role": "network"}
    assert engine.one("vpc/switch:Switch").inputs["zoneId"] == "cn-shenzhen-f"
    node = engine.one("ecs/instance:Instance").inputs
    assert node["tags"]["trainstack:zone"] == "cn-shenzhen-f" and node["instanceType"] == A10
    assert engine.invokes(GET_ZONES) == []  # the catalog knew the zones: getZones (offering only) is not asked


def test_a_second_up_keeps_the_zone_whatever_the_stock_says(engine_factory):
    plan = single_gpu_lora_plan()
    first = engine_factory(stock={"NoSpot": ["cn-shenzhen-e"]})
    first.declare(plan)
    assert first.one("vpc/switch:Switch").inputs["zoneId"] == "cn-shenzhen-e"
    # stock moved to the other zone; the stack's node vSwitch is in e: nothing moves
    second = engine_factory(stock={"NoSpot": ["cn-shenzhen-f"]}, vswitches=node_vswitches(first))
    second.declare(plan)
    assert second.invokes(STOCK) == []
    assert {s.inputs["zoneId"] for s in second.of_type("vpc/switch:Switch")} == {"cn-shenzhen-e"}
    declared = lambda e: sorted(((r.type, r.name, repr(r.inputs)) for r in e.resources))  # noqa: E731
    assert declared(second) == declared(first)  # the second `up` declares exactly what the first did


def test_the_eri_pool_and_services_vswitches_are_not_read_as_the_node_vswitch(engine_factory):
    plan = single_gpu_lora_plan()
    others = [{"vswitchName": f"{plan.name}-{kind}-cn-shenzhen-f", "zoneId": "cn-shenzhen-f",
               "tags": {"trainstack:name": plan.name, "trainstack:role": "network"}} for kind in ("eri", "pool", "services")]
    someone_elses = [{"vswitchName": f"other-{plan.name}-cn-shenzhen-f", "zoneId": "cn-shenzhen-f",
                      "tags": {"trainstack:name": f"other-{plan.name}", "trainstack:role": "network"}}]
    engine = engine_factory(stock={"NoSpot": ["cn-shenzhen-e", "cn-shenzhen-f"]}, vswitches=others + someone_elses)
    engine.declare(plan)
    assert engine.one("vpc/switch:Switch").inputs["zoneId"] == "cn-shenzhen-e"


def test_node_vswitches_in_two_zones_are_a_clear_error(engine_factory):
    plan = single_gpu_lora_plan()
    tags = {"trainstack:name": plan.name, "trainstack:role": "network"}
    engine = engine_factory(vswitches=[{"vswitchName": f"{plan.name}-{z}", "zoneId": z, "tags": tags}
                                       for z in ("cn-shenzhen-e", "cn-shenzhen-f")])
    with pytest.raises(InputError, match="node vSwitches in cn-shenzhen-e, cn-shenzhen-f"):
        engine.declare(plan)


def test_no_zone_of_the_fallback_order_with_stock_is_infeasible_with_each_zone_named(engine_factory):
    engine = engine_factory(stock={"NoSpot": ["cn-shenzhen-a"]})
    with pytest.raises(InfeasibleError) as err:
        engine.declare(single_gpu_lora_plan())
    assert "cn-shenzhen-e: no stock; cn-shenzhen-f: no stock" in err.value.message
    assert any("trainstack up" in s for s in err.value.suggestions)
    assert engine.of_type("vpc/switch:Switch") == []


def test_cpfs_plans_keep_zones_that_offer_cpfs(engine_factory):
    plan = multi_node_erdma_plan()
    engine = engine_factory(cpfs_zones=["cn-shenzhen-f"])
    engine.declare(plan)
    assert {s.inputs["zoneId"] for s in engine.of_type("vpc/switch:Switch")} == {"cn-shenzhen-f"}
    assert engine.one("nas/fileSystem:FileSystem").inputs["zoneId"] == "cn-shenzhen-f"
    no_cpfs = engine_factory(cpfs_zones=["cn-shenzhen-e"])
    with pytest.raises(InfeasibleError, match="cn-shenzhen-f: no CPFS"):
        no_cpfs.declare(plan)


def test_a_type_the_catalog_saw_in_no_zone_takes_an_offering_zone_with_stock(engine_factory):
    # hand-edited: a type the snapshot never saw in the region (the resolver labels it "availability unverified")
    plan = single_gpu_lora_plan()
    rows = tuple(c.model_copy(update={"zone": None}) for c in plan.capacity.candidates if c.planned)
    plan = hand_edited(plan, zone=None, capacity=plan.capacity.model_copy(update={"candidates": rows}))
    engine = engine_factory(stock={"NoSpot": ["cn-shenzhen-f"]})
    engine.declare(plan)
    (offer,) = engine.invokes(GET_ZONES)
    assert offer["availableInstanceType"] == A10 and offer["availableResourceCreation"] == "VSwitch"
    assert engine.one("vpc/switch:Switch").inputs["zoneId"] == "cn-shenzhen-f"
    assert engine.one("ecs/instance:Instance").inputs["tags"]["trainstack:zone"] == "cn-shenzhen-f"


def test_an_elastic_pool_needs_spot_and_on_demand_stock_in_the_same_zone(engine_factory):
    plan = multi_node_erdma_plan(3, profile={"resources": {"spot": "allow", "self_healing": True,
                                                           "max_hourly_cost": 650}})
    assert plan.elastic  # node 0 on demand, the pool on spot
    zones = [c.zone for c in plan.capacity.candidates if c.instance_type == plan.instance_type and c.zone]
    engine = engine_factory(stock={"NoSpot": zones[-1:], "SpotWithPriceLimit": zones}, cpfs_zones=zones)
    engine.declare(plan)
    assert {a["spotStrategy"] for a in engine.invokes(STOCK)} == {"NoSpot", "SpotWithPriceLimit"}
    assert {s.inputs["zoneId"] for s in engine.of_type("vpc/switch:Switch")} == {zones[-1]}


def test_plans_without_a_fallback_order_keep_the_earlier_rule(engine_factory, fake_dlc):
    plan = dlc_plan()
    assert plan.capacity is None
    engine = engine_factory()
    engine.declare(plan)
    assert engine.invokes(STOCK) == [] and engine.invokes(SWITCHES) == []
    assert engine.one("vpc/switch:Switch").inputs["zoneId"] == (plan.zone or "cn-shenzhen-e")


def test_no_zone_offering_the_type_is_a_clear_error(engine_factory):
    # hand-edited: no fallback order, no zone (a plan made before fallback orders existed)
    engine = engine_factory(zones=[])
    with pytest.raises(CloudApiError, match="no zone in cn-shenzhen offers ecs.gn7i-c8g1.2xlarge"):
        engine.declare(single_gpu_lora_plan(zone=None, capacity=None))


def test_a_plan_whose_zone_is_not_its_planned_row_keeps_its_zone(engine):
    # hand-edited: a plan given another zone than its fallback order's own row (set on purpose)
    plan = single_gpu_lora_plan(zone="cn-shenzhen-f")
    assert not plan.capacity.zone_pinned and plan.capacity.candidates[0].zone == "cn-shenzhen-e"
    engine.declare(plan)
    assert engine.invokes(STOCK) == [] and engine.invokes(SWITCHES) == []
    assert engine.one("vpc/switch:Switch").inputs["zoneId"] == "cn-shenzhen-f"
