"""Properties of the pure layout functions (in the style of pulumi-awsx's subnet-layout tests):
for every input in their domain, the layout keeps the documented Alibaba limits."""

from __future__ import annotations

import ipaddress
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from plan_factory import hand_edited, multi_node_erdma_plan
from trainstack.catalog.limits import service_limits
from trainstack.errors import InputError
from trainstack.layout import CPFS_MIN_GIB, CPFS_STEP_GIB, default_vswitch_cidr, deployment_set_layout, essd_for
from trainstack.plan import DEPLOYMENT_SET_MAX, ESSD_MAX_GIB, ESSD_MIN_GIB

BASE = multi_node_erdma_plan(nodes=3)
RESERVED = int(service_limits().number("vpc.vswitch.reserved_addresses"))


@settings(max_examples=60, deadline=None)
@given(nodes=st.integers(min_value=2, max_value=512))
def test_deployment_sets_hold_at_most_the_limit_in_contiguous_balanced_groups(nodes):
    plan = hand_edited(BASE, nodes=nodes, total_gpus=8 * nodes,
                       network=BASE.network.model_copy(update={"deployment_set": "LowLatency",
                                                               "deployment_set_groups": 1,
                                                               "vswitch_cidr": "10.0.0.0/20"}))
    layout = deployment_set_layout(plan)
    groups = math.ceil(nodes / DEPLOYMENT_SET_MAX)
    assert len(layout) == nodes and sorted(set(layout)) == list(range(groups))
    assert layout == sorted(layout)  # contiguous: a group is a run of ranks
    sizes = [layout.count(g) for g in range(groups)]
    assert max(sizes) <= DEPLOYMENT_SET_MAX and max(sizes) - min(sizes) <= 1


@settings(max_examples=30, deadline=None)
@given(nodes=st.integers(min_value=2, max_value=64))
def test_spot_plans_are_never_in_a_deployment_set(nodes):
    plan = hand_edited(BASE, nodes=nodes, total_gpus=8 * nodes, spot=True, spot_price_limit=100.0,
                       spot_strategy="SpotWithPriceLimit",
                       network=BASE.network.model_copy(update={"deployment_set": "LowLatency", "deployment_set_groups": 1}))
    assert deployment_set_layout(plan) == []


@settings(max_examples=80, deadline=None)
@given(prefix=st.integers(min_value=8, max_value=28), nodes=st.integers(min_value=1, max_value=600))
def test_node_addresses_are_distinct_inside_the_vswitch_and_clear_of_reserved_ones(prefix, nodes):
    vpc = str(ipaddress.ip_network(f"10.0.0.0/{prefix}"))
    vswitch = ipaddress.ip_network(default_vswitch_cidr(vpc))
    assert vswitch.subnet_of(ipaddress.ip_network(vpc))
    network = BASE.network.model_copy(update={"vpc_cidr": vpc, "vswitch_cidr": str(vswitch)})
    try:
        ips = [ipaddress.ip_address(a) for a in network.node_private_ips(nodes)]
    except InputError:
        assert nodes + 10 > vswitch.num_addresses - RESERVED  # too small: refused, never overlapping
        return
    assert len(set(ips)) == nodes and all(ip in vswitch for ip in ips)
    # Alibaba keeps the first three and the last address of every vSwitch
    assert all(ip not in (vswitch.network_address + i for i in range(3)) for ip in ips)
    assert vswitch.broadcast_address not in ips


@settings(max_examples=200, deadline=None)
@given(size=st.floats(min_value=0, max_value=200_000, allow_nan=False))
def test_an_essd_meets_its_level_minimum_and_the_size_asked_for(size):
    disk = essd_for(size)
    assert ESSD_MIN_GIB[disk.performance_level] <= disk.size_gib <= ESSD_MAX_GIB
    assert disk.size_gib >= min(math.ceil(size), ESSD_MAX_GIB)
    assert disk.encrypted


@settings(max_examples=100, deadline=None)
@given(a=st.floats(min_value=0, max_value=70_000, allow_nan=False), b=st.floats(min_value=0, max_value=70_000,
                                                                                 allow_nan=False))
def test_a_bigger_disk_never_gets_a_slower_level(a, b):
    small, big = sorted((a, b))
    order = ["PL0", "PL1", "PL2", "PL3"]
    assert order.index(essd_for(small).performance_level) <= order.index(essd_for(big).performance_level)


def test_cpfs_capacity_is_stepped_and_at_least_the_minimum():
    plan = multi_node_erdma_plan(nodes=3)
    cap = plan.storage.cpfs.capacity_gib
    assert cap >= CPFS_MIN_GIB and cap % CPFS_STEP_GIB == 0
    assert cap >= (plan.storage.dataset_gib * 1.2)
