"""What every plan must hold for day two, checked over every sample stack and variant (offline plans
of the real program, tests/preview/sample_plans.py):

* a GPU node with a fixed private IP is replaced delete-before-replace (create-before-delete would
  fail: the old node still holds the address);
* jumbo frames only on a family whose jumbo-frame support is a sourced catalog fact, and the MTU the
  nodes set is the documented one (8500 with jumbo frames, 1400 on eRDMA without, 1500 otherwise);
* every ERI has a queue pair number (one without takes the type's maximum and blocks the next);
* every RAM policy rotates its versions (a custom policy keeps at most five);
* teardown with retained storage completes: nothing ``pulumi destroy`` keeps depends on something it
  deletes (trainstack.preview.teardown).
"""

from __future__ import annotations

import copy

import pytest

import sample_plans
from trainstack.catalog import load_catalog
from trainstack.catalog.limits import service_limits
from trainstack.layout.network import mtu_for
from trainstack.preview.teardown import pinned_deletions

INSTANCE = "alicloud:ecs/instance:Instance"
NAMES = (*sample_plans.STACKS, "qwen-7b-heal", "llama3-70b-essd")


def of_type(doc, type_):
    return [r for r in doc["resources"] if r["type"] == type_]


@pytest.mark.parametrize("name", NAMES)
def test_fixed_ip_nodes_are_replaced_delete_before_replace(name):
    doc = sample_plans.plan(name)
    for node in of_type(doc, INSTANCE):
        if node["inputs"].get("privateIp"):
            assert node["delete_before_replace"], node["name"]


@pytest.mark.parametrize("name", NAMES)
def test_what_trainstack_picked_is_ignored_after_creation_and_what_the_profile_states_is_managed(name):
    """User data (cloud-init runs it once), the image from a family lookup and a derived spot bid."""
    doc = sample_plans.plan(name)
    plan = doc["plan"]
    for node in of_type(doc, INSTANCE):
        ignored = set(node["ignore_changes"])
        assert {"userData", "status"} <= ignored
        assert ("imageId" in ignored) == (not plan["image"].get("image_id"))
        assert ("spotPriceLimit" in ignored) == (plan.get("spot_strategy") == "SpotWithPriceLimit"
                                                and plan.get("spot_price_limit_source") != "profile")


@pytest.mark.parametrize("name", NAMES)
def test_jumbo_frames_only_on_sourced_families_and_the_documented_mtu(name):
    doc = sample_plans.plan(name)
    plan = doc["plan"]
    if plan["target"] != "ecs":
        return
    family = load_catalog().instance(plan["instance_type"]).family
    net = plan["network"]
    assert net["jumbo_frames"] == bool(family.jumbo_frames)
    assert net["mtu"] == mtu_for(net["rdma"], net["jumbo_frames"])
    for node in of_type(doc, INSTANCE):
        assert bool(node["inputs"].get("enableJumboFrame")) == bool(family.jumbo_frames), node["name"]


@pytest.mark.parametrize("name", NAMES)
def test_every_eri_has_a_queue_pair_number(name):
    doc = sample_plans.plan(name)
    for node in of_type(doc, INSTANCE):
        i = node["inputs"]
        if i.get("networkInterfaceTrafficMode") == "HighPerformance":
            assert "queuePairNumber" in i, node["name"]
        eri = i.get("networkInterfaces")
        if eri and eri.get("networkInterfaceTrafficMode") == "HighPerformance":
            assert "queuePairNumber" in eri, node["name"]
    # an ecs_network_interface has no queue_pair_number in the provider: trainstack creates none
    assert of_type(doc, "alicloud:ecs/ecsNetworkInterface:EcsNetworkInterface") == []


@pytest.mark.parametrize("name", NAMES)
def test_every_ram_policy_rotates_its_versions(name):
    doc = sample_plans.plan(name)
    rotate = service_limits().value("ram.policy.rotate_strategy")
    for policy in of_type(doc, "alicloud:ram/policy:Policy"):
        assert policy["inputs"].get("rotateStrategy") == rotate, policy["name"]


@pytest.mark.parametrize("name", NAMES)
def test_teardown_with_retained_storage_completes(name):
    assert pinned_deletions(sample_plans.plan(name)) == []


def test_the_teardown_check_finds_a_retained_file_system_in_a_deleted_vswitch():
    """The check can fail: the 70B plan with its services vSwitch no longer retained."""
    doc = copy.deepcopy(sample_plans.plan("llama3-70b-full"))
    (fs,) = of_type(doc, "alicloud:nas/fileSystem:FileSystem")
    assert fs["protect"] and fs["retain_on_delete"]
    (services,) = [r for r in of_type(doc, "alicloud:vpc/switch:Switch") if r["name"].endswith("-services-vswitch")]
    assert services["urn"] in fs["dependencies"]
    services["protect"] = services["retain_on_delete"] = False
    (line,) = pinned_deletions(doc)
    assert "llama3-70b-full-storage-cpfs" in line and "services-vswitch" in line


def test_kept_node_programs_pin_only_a_bucket_that_destroy_does_not_empty():
    """The node programs are retained (a node may still name an older set); the 70B plan's stack bucket
    holds no checkpoints, so destroy empties and deletes it (force_destroy): nothing is pinned. Without
    force_destroy the same objects would keep the bucket from being deleted, and the check says so."""
    doc = copy.deepcopy(sample_plans.plan("llama3-70b-full"))
    (bucket,) = of_type(doc, "alicloud:oss/bucket:Bucket")
    programs = [r for r in of_type(doc, "alicloud:oss/bucketObject:BucketObject") if r["retain_on_delete"]]
    assert programs and all(bucket["urn"] in r["dependencies"] for r in programs)
    assert bucket["inputs"]["forceDestroy"] is True and pinned_deletions(doc) == []
    bucket["inputs"]["forceDestroy"] = False
    assert len(pinned_deletions(doc)) == len(programs)
