"""GPU nodes: one ``ecs.Instance`` per planned node, nothing decided here that the Plan has not.

What a node gets (all plain values where policies judge them: instance type, spot strategy,
ENI traffic mode, disk sizes):
- the planned type, pay-as-you-go (``instance_charge_type="PostPaid"`` always explicit);
  spot via ``SpotWithPriceLimit`` + the plan's price limit, protection period and interruption
  behaviour, or ``NoSpot``;
- a fixed private IP (``Plan.node_private_ips()``), no public IP (``internet_max_bandwidth_out=0``),
  IMDSv2 only (``http_tokens="required"``), the cluster security group, an encrypted ESSD system
  disk and encrypted data disks at the planned performance level;
- on eRDMA plans only: primary ENI ``HighPerformance`` (+ queue pairs), the second ERI through
  ``network_interfaces`` (one object, network card 1), any further ERIs as
  ``EcsNetworkInterface`` + ``EcsNetworkInterfaceAttachment``; every other plan says ``Standard``;
- a ``LowLatency`` deployment set only when the plan asks for one (on-demand, multi-node, family
  support known), in groups of at most 20 (``DEPLOYMENT_SET_MAX``), never with spot;
- the node RAM role (components/identity.py), user data from ``trainstack.bootstrap``;
- tags from the profile plus ``trainstack:role=training`` and ``trainstack:zone``.

Billing stops when the job ends: the bootstrap's launcher calls ``StopInstance`` with
``StoppedMode=StopCharging`` using the node role (which may stop only this cluster's instances).
``status`` is ignored after creation so a later ``pulumi up`` does not restart stopped nodes.
An optional hard deadline is the plain ``auto_release_time`` passed in (stack config
``trainstack:autoReleaseAt``), never computed from the clock, so previews stay deterministic.
"""

from __future__ import annotations

import base64
import json
from typing import Optional

import pulumi
import pulumi_alicloud as alicloud

from trainstack.errors import InputError
from trainstack.bootstrap import render_user_data
from trainstack.layout import deployment_set_layout
from trainstack.rules import bootstrap_message, checkpoint_disks_planned
from trainstack.stack_config import check_auto_release_time
from trainstack.plan import Plan

from .identity import NodeRole, stop_policy_document
from .network import Network
from .storage import Storage
from trainstack.tags import base_tags, node_tags

#: Physical network cards of the eRDMA GPU types in the catalog (ebmgn7ex/ebmgn8*: 2) [EBM-ZH].
NETWORK_CARDS = 2


def render_user_data_b64(plan: Plan, rank: int, cpfs_mount_address: Optional[str] = None) -> str:
    """The bootstrap's cloud-init text for one node, base64-encoded (what ``user_data`` expects)."""
    try:
        text = render_user_data(plan, rank, cpfs_mount_address=cpfs_mount_address)
    except ValueError as exc:  # the rule book rendered it already: only a deploy-time address can fail here
        raise InputError(bootstrap_message(plan, rank, exc)) from None
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def user_data(plan: Plan, rank: int, cpfs_mount_address: Optional[pulumi.Output[str]]) -> pulumi.Input[str]:
    """Plain when the plan has no CPFS; otherwise rendered once the CPFS export address is known."""
    if plan.storage.cpfs is None or cpfs_mount_address is None:
        return render_user_data_b64(plan, rank)
    return cpfs_mount_address.apply(lambda address: render_user_data_b64(plan, rank, address))


class Cluster(pulumi.ComponentResource):
    """The GPU nodes of an ECS plan, their deployment sets, extra ERIs, role and disk attachments."""

    nodes: list[alicloud.ecs.Instance]
    deployment_sets: list[alicloud.ecs.EcsDeploymentSet]

    def __init__(self, name: str, plan: Plan, zone: str, network: Network, storage: Storage, image_id: str,
                 auto_release_time: Optional[str] = None, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__("trainstack:index:Cluster", name, None, opts)
        if plan.target != "ecs" or not plan.instance_type:
            raise InputError(f"plan {plan.name} targets {plan.target}; ECS nodes need an ECS plan with an instance type")
        child = pulumi.ResourceOptions(parent=self)
        net = plan.network
        auto_release_time = check_auto_release_time(auto_release_time)

        self.identity = NodeRole(f"{name}-identity", plan, opts=child)

        layout = deployment_set_layout(plan)  # pure rule: trainstack.layout
        if net.deployment_set and not layout and plan.nodes > 1:
            pulumi.log.warn(f"{plan.name}: no deployment set (spot instances cannot be in one)", resource=self)
        self.deployment_sets = [
            alicloud.ecs.EcsDeploymentSet(
                f"{name}-lowlatency-{g}", deployment_set_name=f"{plan.name}-lowlatency-{g}", strategy="LowLatency",
                description=f"trainstack {plan.name}: nodes close in the network (group {g})", opts=child)
            for g in range(max(layout) + 1 if layout else 0)
        ]

        ips = plan.node_private_ips()
        self.private_ips = ips
        self.nodes, self.extra_eris = [], []
        for rank, node_name in enumerate(plan.node_names()):
            ds = self.deployment_sets[layout[rank]].id if layout else None
            node = alicloud.ecs.Instance(
                f"{name}-node-{rank}", opts=pulumi.ResourceOptions(parent=self, ignore_changes=["status"]),
                **self._node_args(plan, zone, rank, node_name, ips[rank], network, image_id, ds, auto_release_time,
                                  user_data(plan, rank, storage.cpfs_mount_address)))
            self.nodes.append(node)
            if net.rdma == "erdma":
                self.extra_eris += self._extra_eris(plan, name, rank, node_name, node, network)

        self.disk_attachments = [
            alicloud.ecs.EcsDiskAttachment(f"{name}-ckpt-disk-{rank}", disk_id=disk.id, instance_id=node.id,
                                           delete_with_instance=False, opts=pulumi.ResourceOptions(parent=node))
            for rank, (disk, node) in enumerate(zip(storage.checkpoint_disks, self.nodes))
        ] if checkpoint_disks_planned(plan) else []

        self.role_attachments = [
            alicloud.ecs.RamRoleAttachment(
                f"{name}-role-{rank}", instance_id=node.id, ram_role_name=self.identity.role.role_name,
                opts=pulumi.ResourceOptions(parent=node, depends_on=self.identity.ready))
            for rank, node in enumerate(self.nodes)
        ]
        region = plan.region
        self.stop_policy = alicloud.ram.Policy(
            f"{name}-stop-own-instances", policy_name=f"{plan.name[:52]}-stop-nodes",
            policy_document=pulumi.Output.all(*[n.id for n in self.nodes]).apply(
                lambda ids: json.dumps(stop_policy_document(region, ids))),
            description=f"trainstack {plan.name}: nodes may stop (no-charge) only this cluster's instances",
            tags=base_tags(plan), opts=pulumi.ResourceOptions(parent=self.identity))
        self.stop_attachment = alicloud.ram.RolePolicyAttachment(
            f"{name}-stop-own-instances", role_name=self.identity.role.role_name,
            policy_name=self.stop_policy.policy_name, policy_type="Custom",
            opts=pulumi.ResourceOptions(parent=self.identity))

        self.register_outputs({
            "instance_ids": [n.id for n in self.nodes], "private_ips": ips,
            "deployment_sets": [d.id for d in self.deployment_sets],
        })

    @staticmethod
    def _node_args(plan: Plan, zone: str, rank: int, node_name: str, private_ip: str, network: Network,
                   image_id: str, deployment_set_id: Optional[pulumi.Input[str]],
                   auto_release_time: Optional[str], user_data: pulumi.Input[str]) -> dict:
        st, net = plan.storage, plan.network
        args: dict = dict(
            instance_name=node_name, host_name=node_name,
            description=f"trainstack {plan.name}: GPU node {rank} of {plan.nodes}",
            instance_type=plan.instance_type, image_id=image_id,
            instance_charge_type="PostPaid", spot_strategy=plan.spot_strategy,
            vswitch_id=network.vswitch.id, security_groups=[network.security_group.id], private_ip=private_ip,
            internet_max_bandwidth_out=0,
            system_disk_category=st.system_disk_category, system_disk_performance_level=st.system_disk_performance_level,
            system_disk_size=st.system_disk_gib, system_disk_encrypted=True, system_disk_name=f"{node_name}-system",
            http_endpoint="enabled", http_tokens="required",
            network_interface_traffic_mode="Standard",
            user_data=user_data,
            tags=node_tags(plan, zone, rank), volume_tags=base_tags(plan, zone=zone),
        )
        if plan.spot_strategy == "SpotWithPriceLimit":
            if plan.spot_price_limit is None:
                raise InputError(f"plan {plan.name}: spot without a price limit")
            args.update(spot_price_limit=plan.spot_price_limit, spot_duration=plan.spot_duration_hours,
                        spot_interruption_behavior=plan.spot_interruption_behavior)
        disk = st.data_disk
        if disk is not None and not checkpoint_disks_planned(plan):
            args["data_disks"] = [alicloud.ecs.InstanceDataDiskArgs(
                category=disk.category, performance_level=disk.performance_level, size=disk.size_gib,
                encrypted=True, delete_with_instance=disk.delete_with_instance, name=f"{node_name}-data")]
        if net.rdma == "erdma":
            args["network_interface_traffic_mode"] = "HighPerformance"
            if net.queue_pair_number:
                args["queue_pair_number"] = net.queue_pair_number
            if net.eri_per_node >= 2:
                args["network_interfaces"] = alicloud.ecs.InstanceNetworkInterfacesArgs(
                    network_card_index=1, network_interface_traffic_mode="HighPerformance",
                    queue_pair_number=net.queue_pair_number, security_group_ids=[network.security_group.id],
                    vswitch_id=network.vswitch.id)
        if net.mtu > 1500:
            args["enable_jumbo_frame"] = True
        if deployment_set_id is not None:
            args["deployment_set_id"] = deployment_set_id
        if net.key_pair:
            args["key_name"] = net.key_pair
        if auto_release_time:
            args["auto_release_time"] = auto_release_time
        return args

    @staticmethod
    def _extra_eris(plan: Plan, name: str, rank: int, node_name: str, node: alicloud.ecs.Instance,
                    network: Network) -> list:
        """ERIs 3.. of a node: ``Instance.network_interfaces`` holds only one secondary interface."""
        out = []
        in_node = pulumi.ResourceOptions(parent=node)
        for eri in range(2, plan.network.eri_per_node):
            # GPU bare-metal types expose two physical network cards (0 and 1) and spread ERIs
            # over them [EBM-ZH]; further ERIs alternate between the two, never a third index.
            card = eri % NETWORK_CARDS
            eni = alicloud.ecs.EcsNetworkInterface(
                f"{name}-node-{rank}-eri-{eri}", network_interface_name=f"{node_name}-eri-{eri}",
                vswitch_id=network.vswitch.id, security_group_ids=[network.security_group.id],
                network_interface_traffic_mode="HighPerformance",
                description=f"trainstack {plan.name}: ERI {eri} of node {rank}",
                tags=base_tags(plan), opts=in_node)
            attachment = alicloud.ecs.EcsNetworkInterfaceAttachment(
                f"{name}-node-{rank}-eri-{eri}", instance_id=node.id, network_interface_id=eni.id,
                network_card_index=card, wait_for_network_configuration_ready=True, opts=in_node)
            out.append((eni, attachment))
        return out
