"""Network: VPC, vSwitches in the plan's zone, the cluster security group and (optional) NAT egress.

Translates ``plan.network`` into resources; decides nothing the Plan has not already decided
(trainstack.layout.network: the address plan; trainstack.layout.lifecycle: what is retained).

- the node vSwitch holds only the nodes' fixed primary IPs; the ERI vSwitch the secondary ERIs;
  the services vSwitch CPFS, its protocol service and the NAT gateway (random allocations);
- with a retained CPFS the VPC and the services vSwitch are protected and retained too (a file
  system cannot outlive its VPC), so `pulumi destroy` leaves them and completes.

- All traffic between the cluster's own nodes (NCCL, rendezvous, eRDMA) is allowed by one rule
  whose source is the cluster's security group itself (never a CIDR).
- SSH (tcp/22) only from ``plan.network.ssh_cidrs``; none by default. GPU nodes get no public IP,
  so those CIDRs reach them through a VPN / Express Connect / bastion inside the VPC.
- Outbound internet only through a NAT gateway with SNAT when ``internet_egress`` is true;
  otherwise nodes use VPC-internal endpoints (Alibaba internal mirrors, ``-internal`` OSS).
"""

from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_alicloud as alicloud

from trainstack.catalog.limits import service_limits
from trainstack.layout.lifecycle import network_lifecycle, services_vswitch_lifecycle
from trainstack.layout.network import ssh_rule_cidrs
from trainstack.plan import Plan

from trainstack.tags import base_tags

from .zone import resolve_zone  # noqa: F401 (the stack's zone: components/zone.py)

NCCL_RULE_DESCRIPTION = "all traffic between the cluster's own nodes (NCCL, eRDMA, rendezvous)"


class Network(pulumi.ComponentResource):
    """VPC + vSwitch + security group (+ NAT gateway, EIP and SNAT when egress is planned)."""

    vpc: alicloud.vpc.Network
    vswitch: alicloud.vpc.Switch
    eri_vswitch: Optional[alicloud.vpc.Switch]
    pool_vswitch: Optional[alicloud.vpc.Switch]
    services_vswitch: Optional[alicloud.vpc.Switch]
    security_group: alicloud.ecs.SecurityGroup
    nat_gateway: Optional[alicloud.vpc.NatGateway]

    def __init__(self, name: str, plan: Plan, zone: str, opts: Optional[pulumi.ResourceOptions] = None,
                 reservation: Optional[pulumi.Resource] = None):
        super().__init__("trainstack:index:Network", name, None, opts)
        net = plan.network
        child = pulumi.ResourceOptions(parent=self)
        # with a capacity reservation, the nodes' vSwitches (and so the nodes) wait until it holds their
        # capacity; not the services vSwitch: a retained one may not depend on what `pulumi destroy` deletes
        zonal = pulumi.ResourceOptions(parent=self, depends_on=[reservation] if reservation is not None else None)
        tags = base_tags(plan, role="network")
        self.zone = zone

        keep = network_lifecycle(plan)
        self.vpc = alicloud.vpc.Network(
            f"{name}-vpc", vpc_name=f"{plan.name}-vpc", cidr_block=net.vpc_cidr,
            description=f"trainstack {plan.name}", tags=tags,
            opts=pulumi.ResourceOptions(parent=self, protect=keep.protect, retain_on_delete=keep.retain_on_delete))
        self.vswitch = alicloud.vpc.Switch(
            f"{name}-vswitch", vswitch_name=f"{plan.name}-{zone}", vpc_id=self.vpc.id,
            cidr_block=net.vswitch_cidr, zone_id=zone, tags=tags,
            description="trainstack nodes: fixed primary IPs only", opts=zonal)
        self.eri_vswitch = self.services_vswitch = self.pool_vswitch = None
        if net.eri_vswitch_cidr:
            self.eri_vswitch = alicloud.vpc.Switch(
                f"{name}-eri-vswitch", vswitch_name=f"{plan.name}-eri-{zone}", vpc_id=self.vpc.id,
                cidr_block=net.eri_vswitch_cidr, zone_id=zone, tags=tags,
                description="trainstack secondary ERIs (addresses allocated at random)", opts=zonal)
        if net.pool_vswitch_cidr:
            self.pool_vswitch = alicloud.vpc.Switch(
                f"{name}-pool-vswitch", vswitch_name=f"{plan.name}-pool-{zone}", vpc_id=self.vpc.id,
                cidr_block=net.pool_vswitch_cidr, zone_id=zone, tags=tags,
                description="trainstack self-healing pool nodes (addresses chosen by ESS)", opts=zonal)
        if net.services_vswitch_cidr:
            skeep = services_vswitch_lifecycle(plan)
            self.services_vswitch = alicloud.vpc.Switch(
                f"{name}-services-vswitch", vswitch_name=f"{plan.name}-services-{zone}", vpc_id=self.vpc.id,
                cidr_block=net.services_vswitch_cidr, zone_id=zone, tags=tags,
                description="trainstack CPFS, its protocol service and NAT (addresses allocated at random)",
                opts=pulumi.ResourceOptions(parent=self, protect=skeep.protect, retain_on_delete=skeep.retain_on_delete))
        self.security_group = alicloud.ecs.SecurityGroup(
            f"{name}-sg", security_group_name=f"{plan.name}-cluster", vpc_id=self.vpc.id,
            security_group_type="normal", inner_access_policy="Accept",
            description="trainstack GPU cluster: intra-cluster traffic and declared SSH sources only",
            tags=tags, opts=child)
        sg_child = pulumi.ResourceOptions(parent=self.security_group)
        self.intra_cluster_rule = alicloud.ecs.SecurityGroupRule(
            f"{name}-intra-cluster", type="ingress", ip_protocol="all", port_range="-1/-1",
            policy="accept", nic_type="intranet", priority=1,
            security_group_id=self.security_group.id, source_security_group_id=self.security_group.id,
            description=NCCL_RULE_DESCRIPTION, opts=sg_child)
        self.ssh_rules = [
            alicloud.ecs.SecurityGroupRule(
                f"{name}-ssh-{i}", type="ingress", ip_protocol="tcp", port_range="22/22",
                policy="accept", nic_type="intranet", priority=10, cidr_ip=cidr,
                security_group_id=self.security_group.id, description=f"SSH from {cidr} (access.ssh_cidrs)",
                opts=sg_child)
            for i, cidr in enumerate(ssh_rule_cidrs(net))
        ]

        self.nat_gateway = self.eip = self.snat_entry = None
        if net.internet_egress:
            self.nat_gateway = alicloud.vpc.NatGateway(
                f"{name}-nat", nat_gateway_name=f"{plan.name}-nat", vpc_id=self.vpc.id,
                vswitch_id=self.services_vswitch.id if self.services_vswitch else self.vswitch.id,
                nat_type=str(service_limits().value("vpc.nat_gateway.type")), network_type="internet",
                payment_type="PayAsYouGo", internet_charge_type="PayByLcu", tags=tags, opts=child)
            self.eip = alicloud.ecs.EipAddress(
                f"{name}-nat-eip", address_name=f"{plan.name}-nat", payment_type="PayAsYouGo",
                internet_charge_type="PayByTraffic", bandwidth="200", tags=tags, opts=child)
            self.eip_association = alicloud.ecs.EipAssociation(
                f"{name}-nat-eip", allocation_id=self.eip.id, instance_id=self.nat_gateway.id,
                instance_type="Nat", opts=pulumi.ResourceOptions(parent=self.nat_gateway))
            self.snat_entry = alicloud.vpc.SnatEntry(
                f"{name}-snat", snat_entry_name=f"{plan.name}-egress",
                snat_table_id=self.nat_gateway.snat_table_ids, source_vswitch_id=self.vswitch.id,
                snat_ip=self.eip.ip_address,
                opts=pulumi.ResourceOptions(parent=self.nat_gateway, depends_on=[self.eip_association]))
            if self.pool_vswitch is not None:  # the pool's nodes install packages too
                self.pool_snat_entry = alicloud.vpc.SnatEntry(
                    f"{name}-pool-snat", snat_entry_name=f"{plan.name}-pool-egress",
                    snat_table_id=self.nat_gateway.snat_table_ids, source_vswitch_id=self.pool_vswitch.id,
                    snat_ip=self.eip.ip_address,
                    opts=pulumi.ResourceOptions(parent=self.nat_gateway, depends_on=[self.eip_association]))

        self.register_outputs({
            "vpc_id": self.vpc.id, "vswitch_id": self.vswitch.id,
            "services_vswitch_id": self.services_vswitch.id if self.services_vswitch else None,
            "pool_vswitch_id": self.pool_vswitch.id if self.pool_vswitch else None,
            "security_group_id": self.security_group.id, "zone": zone,
            "internet_egress": net.internet_egress,
        })
