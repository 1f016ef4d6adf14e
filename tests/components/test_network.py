"""Network: where the nodes live and who can reach them."""

import pytest

from plan_factory import multi_node_erdma_plan, single_gpu_lora_plan
from trainstack.errors import CloudApiError, InputError

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


def test_zone_left_to_deploy_time_is_looked_up_and_used_everywhere(engine):
    engine.declare(single_gpu_lora_plan(zone=None))
    (args,) = engine.invokes("alicloud:index/getZones:getZones")
    assert args["availableInstanceType"] == "ecs.gn7i-c8g1.2xlarge"
    assert args["availableResourceCreation"] == "VSwitch"
    assert engine.one("vpc/switch:Switch").inputs["zoneId"] == "cn-shenzhen-e"
    assert engine.one("ecs/instance:Instance").inputs["tags"]["trainstack:zone"] == "cn-shenzhen-e"


def test_zone_lookup_for_cpfs_plans_keeps_zones_that_offer_cpfs(engine):
    engine.declare(multi_node_erdma_plan(zone=None))
    assert {s.inputs["zoneId"] for s in engine.of_type("vpc/switch:Switch")} == {"cn-shenzhen-f"}
    assert engine.one("nas/fileSystem:FileSystem").inputs["zoneId"] == "cn-shenzhen-f"


def test_no_zone_offering_the_type_is_a_clear_error(engine_factory):
    engine = engine_factory(zones=[])
    with pytest.raises(CloudApiError, match="no zone in cn-shenzhen offers ecs.gn7i-c8g1.2xlarge"):
        engine.declare(single_gpu_lora_plan(zone=None))


def test_a_pinned_zone_needs_no_lookup(engine):
    engine.declare(single_gpu_lora_plan())
    assert engine.invokes("alicloud:index/getZones:getZones") == []
