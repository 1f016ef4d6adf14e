"""Day-two rules: what would hurt the second `pulumi up` of a plan (MTU and jumbo frames from sourced
family facts, queue pairs on every ERI, vSwitches that keep random allocations away from fixed IPs).
"""

from __future__ import annotations

import ipaddress
from typing import Optional

from ..catalog import load_catalog
from ..errors import Problem
from ..layout.lifecycle import fixed_ips, node_lifecycle
from ..layout.network import MAX_ERIS_PER_NODE, mtu_for, queue_pairs_per_eri
from ..plan import Plan


def day_two_problems(plan: Plan) -> list[Optional[Problem]]:
    """What would hurt the second `pulumi up`: a wrong MTU, jumbo frames without a sourced fact, an ERI
    that could take the type's every queue pair, vSwitches that let random allocations near fixed IPs."""
    if plan.target != "ecs":
        return []

    net, out = plan.network, []
    family = load_catalog().instance(plan.instance_type or "").family if plan.instance_type else None
    if net.jumbo_frames and not (family and family.jumbo_frames):
        out.append(Problem(path="network", message=f"jumbo frames on {plan.instance_type}: no source documents them "
                                                    f"for family {family.name if family else '?'}"))
    if net.mtu != mtu_for(net.rdma, net.jumbo_frames):
        out.append(Problem(path="network", message=f"MTU {net.mtu} is not the documented MTU for rdma {net.rdma} "
                                                    f"{'with' if net.jumbo_frames else 'without'} jumbo frames "
                                                    f"({mtu_for(net.rdma, net.jumbo_frames)})"))
    if net.rdma == "erdma" and net.eri_per_node > MAX_ERIS_PER_NODE:
        out.append(Problem(path="network", message=f"{net.eri_per_node} ERIs per node: at most {MAX_ERIS_PER_NODE} can "
                                                    "get a queue pair number"))
    if net.rdma == "erdma" and net.queue_pair_number_max:
        if net.queue_pair_number != queue_pairs_per_eri(net.queue_pair_number_max, max(1, net.eri_per_node)):
            out.append(Problem(path="network", message=f"queue pairs per ERI {net.queue_pair_number} are not the type's "
                                                        f"{net.queue_pair_number_max} split over {net.eri_per_node}"))
    if fixed_ips(plan) and not node_lifecycle(plan).delete_before_replace:
        out.append(Problem(path="network", message="fixed-IP nodes must be replaced delete-before-replace"))
    blocks = {"node": net.vswitch_cidr, "ERI": net.eri_vswitch_cidr, "services": net.services_vswitch_cidr}
    vpc = ipaddress.ip_network(net.vpc_cidr)
    present = {k: ipaddress.ip_network(v) for k, v in blocks.items() if v}
    for k, block in present.items():
        if not block.subnet_of(vpc):
            out.append(Problem(path="network", message=f"the {k} vSwitch {block} is outside the VPC {vpc}"))
        for other, b2 in present.items():
            if other < k and block.overlaps(b2):
                out.append(Problem(path="network", message=f"the {k} and {other} vSwitches overlap ({block}, {b2})"))
    if net.rdma == "erdma" and net.eri_per_node >= 2 and not net.eri_vswitch_cidr:
        out.append(Problem(path="network", message="secondary ERIs need their own vSwitch (random addresses)"))
    needs_services = plan.storage.cpfs is not None or net.internet_egress
    if needs_services and not net.services_vswitch_cidr:
        out.append(Problem(path="network", message="CPFS and the NAT gateway need the services vSwitch"))
    return out
