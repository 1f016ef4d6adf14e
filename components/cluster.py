"""GPU nodes: one ``ecs.Instance`` per planned node, nothing decided here that the Plan has not.

What a node gets (all plain values where policies judge them: instance type, spot strategy,
ENI traffic mode, disk sizes):
- the planned type, pay-as-you-go (``instance_charge_type="PostPaid"`` always explicit);
  spot via ``SpotWithPriceLimit`` + the plan's price limit, protection period and interruption
  behaviour, or ``NoSpot``;
- a fixed private IP (``Plan.node_private_ips()``) in the node vSwitch, which holds nothing else, and
  ``delete_before_replace``: a replacement node takes the IP the old one releases;
- no public IP (``internet_max_bandwidth_out=0``), IMDSv2 only (``http_tokens="required"``), the
  cluster security group, an encrypted ESSD system disk; its data (and checkpoint) disks are
  standalone ``EcsDisk``s attached here (``EcsDiskAttachment``), so they grow in place and outlive
  a replaced node;
- on eRDMA plans only: primary ENI ``HighPerformance`` and, for a second ERI, one
  ``network_interfaces`` block (network card 1) in the ERI vSwitch, each with its queue pairs
  (the plan's, or ``QueuePairsPerEri`` read once at deploy time); jumbo frames only where the
  plan has them (sourced family facts); every other plan says ``Standard``;
- a ``LowLatency`` deployment set only when the plan asks for one (on-demand, multi-node, family
  support known), in groups of at most 20 (``DEPLOYMENT_SET_MAX``), never with spot;
- the node RAM role (components/identity.py), user data from ``trainstack.bootstrap`` (first
  boot only: ignored after creation), and the ``trainstack:job-settings`` tag: the SHA-256 of the
  job settings document (components/job_settings.py) the node checks at every job start;
- tags from the profile plus ``trainstack:role=training`` and ``trainstack:zone``.

What a later `pulumi up` leaves alone is trainstack.layout.lifecycle's decision (``ignore_changes``:
user data, a looked-up image, a spot bid taken from the on-demand price, ``status``).

Billing stops when the job ends: the bootstrap's launcher calls ``StopInstance`` with
``StoppedMode=StopCharging`` using the node role (which may stop only this cluster's instances).
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
from trainstack.layout.lifecycle import node_lifecycle, ram_policy_rotate_strategy
from trainstack.rules import bootstrap_message
from trainstack.stack_config import check_auto_release_time
from trainstack.plan import Plan

from .identity import NodeRole, stop_policy_document
from .job_settings import JobSettingsObject
from .network import Network
from .queue_pairs import QueuePairsPerEri
from .storage import Storage
from trainstack.tags import base_tags, node_tags


def render_user_data_b64(plan: Plan, rank: int) -> str:
    """The bootstrap's cloud-init text for one node, base64-encoded (what ``user_data`` expects)."""
    try:
        text = render_user_data(plan, rank)
    except ValueError as exc:  # the rule book rendered it already
        raise InputError(bootstrap_message(plan, rank, exc)) from None
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


def user_data(plan: Plan, rank: int) -> str:
    """Plain: nothing in the user data depends on a deploy-time value (the CPFS address and every job
    setting travel through the job settings channel)."""
    return render_user_data_b64(plan, rank)


def queue_pairs(plan: Plan, name: str, parent: pulumi.Resource) -> Optional[pulumi.Input[int]]:
    """Queue pairs of each ERI: the plan's, or read once at deploy time; None without eRDMA."""
    net = plan.network
    if net.rdma != "erdma" or net.eri_per_node < 1:
        return None
    if net.queue_pair_number:
        return net.queue_pair_number
    lookup = QueuePairsPerEri(f"{name}-queue-pairs", region=plan.region, instance_type=plan.instance_type or "",
                              eris=net.eri_per_node, opts=pulumi.ResourceOptions(parent=parent))
    return lookup.per_eri


class Cluster(pulumi.ComponentResource):
    """The GPU nodes of an ECS plan, their deployment sets, extra ERIs, role and disk attachments."""

    nodes: list[alicloud.ecs.Instance]
    deployment_sets: list[alicloud.ecs.EcsDeploymentSet]

    def __init__(self, name: str, plan: Plan, zone: str, network: Network, storage: Storage, image_id: str,
                 job_settings: JobSettingsObject, auto_release_time: Optional[str] = None,
                 opts: Optional[pulumi.ResourceOptions] = None):
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
        qp = queue_pairs(plan, name, self)
        life = node_lifecycle(plan)
        self.nodes = []
        names = plan.node_names()
        for rank in plan.instance_ranks():  # a multi-node self-healing plan: node 0 alone (the pool has the rest)
            node_name = names[rank]
            ds = self.deployment_sets[layout[rank]].id if layout else None
            node = alicloud.ecs.Instance(
                f"{name}-node-{rank}",
                opts=pulumi.ResourceOptions(parent=self, ignore_changes=list(life.ignore_changes),
                                            delete_before_replace=life.delete_before_replace,
                                            depends_on=[job_settings.object]),
                **self._node_args(plan, zone, rank, node_name, ips[rank], network, image_id, ds, auto_release_time,
                                  user_data(plan, rank), job_settings.digest, qp))
            self.nodes.append(node)

        # the disks outlive a replaced node: only the attachment is replaced (detach, attach again)
        self.disk_attachments = [
            alicloud.ecs.EcsDiskAttachment(f"{name}-{kind}-disk-{rank}", disk_id=disk.id, instance_id=node.id,
                                           delete_with_instance=False, opts=pulumi.ResourceOptions(parent=node))
            for kind, disks in (("data", storage.data_disks), ("ckpt", storage.checkpoint_disks))
            for rank, (disk, node) in zip(plan.instance_ranks(), zip(disks, self.nodes))
        ]

        self.role_attachments = [
            alicloud.ecs.RamRoleAttachment(
                f"{name}-role-{rank}", instance_id=node.id, ram_role_name=self.identity.role.role_name,
                opts=pulumi.ResourceOptions(parent=node, depends_on=self.identity.ready))
            for rank, node in zip(plan.instance_ranks(), self.nodes)
        ]
        region = plan.region
        self.stop_policy = alicloud.ram.Policy(
            f"{name}-stop-own-instances", policy_name=f"{plan.name[:52]}-stop-nodes",
            policy_document=pulumi.Output.all(*[n.id for n in self.nodes]).apply(
                lambda ids: json.dumps(stop_policy_document(region, ids))),
            description=f"trainstack {plan.name}: nodes may stop (no-charge) only this cluster's instances",
            rotate_strategy=ram_policy_rotate_strategy(), tags=base_tags(plan),
            opts=pulumi.ResourceOptions(parent=self.identity))
        self.stop_attachment = alicloud.ram.RolePolicyAttachment(
            f"{name}-stop-own-instances", role_name=self.identity.role.role_name,
            policy_name=self.stop_policy.policy_name, policy_type="Custom",
            opts=pulumi.ResourceOptions(parent=self.identity))

        self.register_outputs({
            "instance_ids": [n.id for n in self.nodes], "private_ips": [ips[r] for r in plan.instance_ranks()],
            "deployment_sets": [d.id for d in self.deployment_sets],
        })

    @staticmethod
    def _node_args(plan: Plan, zone: str, rank: int, node_name: str, private_ip: str, network: Network,
                   image_id: str, deployment_set_id: Optional[pulumi.Input[str]],
                   auto_release_time: Optional[str], user_data: pulumi.Input[str],
                   job_settings_digest: pulumi.Input[str], queue_pair_number: Optional[pulumi.Input[int]]) -> dict:
        st, net = plan.storage, plan.network
        args: dict = dict(
            instance_name=node_name, host_name=node_name,
            description=f"trainstack {plan.name}: GPU node {rank}",
            instance_type=plan.instance_type, image_id=image_id,
            instance_charge_type="PostPaid", spot_strategy=plan.node_spot_strategy(rank),
            vswitch_id=network.vswitch.id, security_groups=[network.security_group.id], private_ip=private_ip,
            internet_max_bandwidth_out=0,
            system_disk_category=st.system_disk_category, system_disk_performance_level=st.system_disk_performance_level,
            system_disk_size=st.system_disk_gib, system_disk_encrypted=True, system_disk_name=f"{node_name}-system",
            http_endpoint="enabled", http_tokens="required",
            network_interface_traffic_mode="Standard",
            user_data=user_data,
            tags=node_tags(plan, zone, rank, job_settings_digest), volume_tags=base_tags(plan, zone=zone),
        )
        if args["spot_strategy"] == "SpotWithPriceLimit":
            if plan.spot_price_limit is None:
                raise InputError(f"plan {plan.name}: spot without a price limit")
            args.update(spot_price_limit=plan.spot_price_limit, spot_duration=plan.spot_duration_hours,
                        spot_interruption_behavior=plan.spot_interruption_behavior)
        if net.rdma == "erdma":
            args["network_interface_traffic_mode"] = "HighPerformance"
            args["queue_pair_number"] = queue_pair_number
            if net.eri_per_node >= 2:
                assert network.eri_vswitch is not None, "the rule book gives a second ERI its vSwitch"
                args["network_interfaces"] = alicloud.ecs.InstanceNetworkInterfacesArgs(
                    network_card_index=1, network_interface_traffic_mode="HighPerformance",
                    queue_pair_number=queue_pair_number, security_group_ids=[network.security_group.id],
                    vswitch_id=network.eri_vswitch.id)
        if net.jumbo_frames:
            args["enable_jumbo_frame"] = True
        if deployment_set_id is not None:
            args["deployment_set_id"] = deployment_set_id
        if net.key_pair:
            args["key_name"] = net.key_pair
        if auto_release_time:
            args["auto_release_time"] = auto_release_time
        return args
