"""GPU nodes: the planned type, spot terms, eRDMA wiring, placement, access and billing stop."""

import base64
import json

import pytest

from conftest import QUEUE_PAIRS

from trainstack.bootstrap import render_user_data
from plan_factory import multi_node_erdma_plan, single_gpu_lora_plan, spot_plan
from trainstack.errors import InputError
from trainstack.plan import DEPLOYMENT_SET_MAX

INSTANCE = "ecs/instance:Instance"
DEPLOYMENT_SET = "ecs/ecsDeploymentSet:EcsDeploymentSet"
ENI = "ecs/ecsNetworkInterface:EcsNetworkInterface"
ENI_ATTACHMENT = "ecs/ecsNetworkInterfaceAttachment:EcsNetworkInterfaceAttachment"
DISK = "ecs/ecsDisk:EcsDisk"
DISK_ATTACHMENT = "ecs/ecsDiskAttachment:EcsDiskAttachment"


def _network(plan, **update):
    return plan.model_copy(update={"network": plan.network.model_copy(update=update)})


def _strings(value):
    """Every string anywhere in a (nested) input value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def test_single_gpu_node_is_the_planned_on_demand_type(engine):
    plan = single_gpu_lora_plan()
    engine.declare(plan)
    node = engine.one(INSTANCE).inputs
    assert node["instanceType"] == "ecs.gn7i-c8g1.2xlarge"
    assert node["instanceChargeType"] == "PostPaid"
    assert node["spotStrategy"] == "NoSpot"
    assert not {"spotPriceLimit", "spotDuration", "spotInterruptionBehavior"} & node.keys()
    assert node["networkInterfaceTrafficMode"] == "Standard"
    assert "networkInterfaces" not in node and "deploymentSetId" not in node
    assert node["privateIp"] == plan.node_private_ips()[0] == "10.0.0.10"


def test_nodes_have_no_public_ip_and_imdsv2_only(engine):
    engine.declare(multi_node_erdma_plan())
    for node in engine.of_type(INSTANCE):
        assert node.inputs["internetMaxBandwidthOut"] == 0
        assert node.inputs["httpTokens"] == "required"
        assert node.inputs["securityGroups"] == ["securitygroup-llama3-70b-full-network-sg"]


def test_disks_are_encrypted_essd_at_the_planned_level_and_size(engine):
    """The data disk is a standalone disk per node, attached (a size change grows it online instead of
    replacing the node, which a disk declared on the instance would: data_disks is ForceNew)."""
    plan = multi_node_erdma_plan()
    engine.declare(plan)
    planned = plan.storage.data_disk
    nodes = sorted(engine.of_type(INSTANCE), key=lambda n: n.name)
    for node in nodes:
        i = node.inputs
        assert (i["systemDiskCategory"], i["systemDiskPerformanceLevel"], i["systemDiskSize"]) == ("cloud_essd", "PL1", 200)
        assert i["systemDiskEncrypted"] is True
        assert "dataDisks" not in i
    disks = sorted((d for d in engine.of_type(DISK) if d.name.split("-")[-3] == "data"), key=lambda d: d.name)
    assert len(disks) == plan.nodes
    for rank, disk in enumerate(disks):
        i = disk.inputs
        assert (i["category"], i["performanceLevel"], i["size"]) == ("cloud_essd", planned.performance_level,
                                                                      planned.size_gib)
        assert i["encrypted"] is True and i["deleteWithInstance"] is False and i["type"] == "online"
        assert i["diskName"] == f"llama3-70b-full-node-{rank}-data"
    attached = {(a.inputs["diskId"], a.inputs["instanceId"]) for a in engine.of_type(DISK_ATTACHMENT)}
    assert attached >= {(f"ecsdisk-{d.name}", f"instance-{n.name}") for d, n in zip(disks, nodes)}


def test_spot_node_bids_the_plan_price_with_protection_and_interruption_terms(engine):
    plan = spot_plan(spot_duration_hours=0, spot_interruption_behavior="Stop")  # hand-edited spot terms
    engine.declare(plan)
    node = engine.one(INSTANCE).inputs
    assert node["spotStrategy"] == "SpotWithPriceLimit"
    assert node["spotPriceLimit"] == plan.spot_price_limit
    assert node["spotDuration"] == 0
    assert node["spotInterruptionBehavior"] == "Stop"
    assert node["instanceChargeType"] == "PostPaid"


def test_spot_nodes_are_never_in_a_deployment_set(engine):
    plan = _network(spot_plan(nodes=2, total_gpus=8), deployment_set="LowLatency", deployment_set_groups=1)
    engine.declare(plan)
    assert engine.of_type(DEPLOYMENT_SET) == []
    assert all("deploymentSetId" not in n.inputs for n in engine.of_type(INSTANCE))


def test_erdma_nodes_use_high_performance_interfaces_with_queue_pairs(engine):
    plan = multi_node_erdma_plan(nodes=4)
    engine.declare(plan)
    nodes = engine.of_type(INSTANCE)
    assert len(nodes) == 4 and plan.network.eri_per_node == 2
    # the catalog does not know the type's queue pairs: DescribeInstanceTypes answers at deploy time
    assert plan.network.queue_pair_number is None
    qpn = QUEUE_PAIRS // plan.network.eri_per_node
    for node in nodes:
        i = node.inputs
        assert i["networkInterfaceTrafficMode"] == "HighPerformance"
        assert i.get("queuePairNumber") == qpn
        eri = i["networkInterfaces"]  # one object, not a list
        assert eri["networkInterfaceTrafficMode"] == "HighPerformance"
        assert eri["networkCardIndex"] == 1 and eri.get("queuePairNumber") == qpn
        # the secondary ERI takes a random address: its own vSwitch, never the nodes' fixed-IP one
        assert eri["securityGroupIds"] == i["securityGroups"]
        assert eri["vswitchId"] == "switch-llama3-70b-full-network-eri-vswitch" != i["vswitchId"]
        assert "enableJumboFrame" not in i and plan.network.mtu == 1400  # no sourced jumbo frames on ebmgn7ex
    assert engine.of_type(ENI) == []  # two ERIs per node fit on the instance itself


def test_more_than_two_eris_are_refused_they_could_not_get_queue_pairs(engine):
    """A third ERI would be an ecs_network_interface, which has no queue_pair_number in the provider
    (an ERI without one takes the type's whole maximum): the rule book refuses the plan."""
    with pytest.raises(InputError, match="4 ERIs per node: at most 2 can get a queue pair number"):
        engine.declare(_network(multi_node_erdma_plan(nodes=3), eri_per_node=4))  # hand-edited: 4 ERIs per node
    assert engine.of_type(ENI) == []


@pytest.mark.parametrize("plan", [single_gpu_lora_plan(), spot_plan(),
                                  _network(multi_node_erdma_plan(), rdma="none", eri_per_node=0, jumbo_frames=False,
                                           mtu=1500, nccl_env={}, eri_vswitch_cidr=None)],
                         ids=["lora", "spot", "multi-node-without-rdma"])
def test_plans_without_erdma_never_ask_for_high_performance(engine, plan):
    engine.declare(plan)
    for r in engine.resources:
        assert "HighPerformance" not in set(_strings(r.inputs)), r.name
    assert engine.of_type(ENI) == []


def test_on_demand_multi_node_cluster_shares_one_low_latency_deployment_set(engine):
    engine.declare(multi_node_erdma_plan(nodes=4))
    (ds,) = engine.of_type(DEPLOYMENT_SET)
    assert ds.inputs["strategy"] == "LowLatency"
    assert {n.inputs["deploymentSetId"] for n in engine.of_type(INSTANCE)} == {f"ecsdeploymentset-{ds.name}"}


def test_large_clusters_are_split_into_deployment_sets_of_at_most_20(engine):
    plan = multi_node_erdma_plan(nodes=45)
    assert plan.network.deployment_set_groups == 3
    engine.declare(plan)
    sets = engine.of_type(DEPLOYMENT_SET)
    assert len(sets) == 3
    members = {f"ecsdeploymentset-{d.name}": 0 for d in sets}
    for n in engine.of_type(INSTANCE):
        members[n.inputs["deploymentSetId"]] += 1
    assert sum(members.values()) == 45 and max(members.values()) <= DEPLOYMENT_SET_MAX


def test_no_deployment_set_unless_the_plan_asks_for_one(engine):
    engine.declare(_network(multi_node_erdma_plan(nodes=3), deployment_set=None, deployment_set_groups=0))
    assert engine.of_type(DEPLOYMENT_SET) == []


def test_training_nodes_carry_profile_tags_and_policy_markers(engine):
    engine.declare(multi_node_erdma_plan(nodes=3))
    for node in engine.of_type(INSTANCE):
        tags = node.inputs["tags"]
        assert tags["trainstack:role"] == "training"
        assert tags["trainstack:zone"] == engine.result.zone
        assert tags["trainstack:gpus-per-node"] == "8" and tags["trainstack:gpu-model"] == "A100-80G"
        assert tags["team"] == "foundation"


def test_user_data_is_the_bootstrap_for_each_rank_base64_encoded(engine):
    plan = multi_node_erdma_plan(nodes=3)
    engine.declare(plan)
    nodes = sorted(engine.of_type(INSTANCE), key=lambda n: n.name)
    deployed = engine.result.plan  # the stack bucket's name completed at deploy time
    assert deployed.storage.oss.bucket != plan.storage.oss.bucket
    for rank, node in enumerate(nodes):
        expected = render_user_data(deployed, rank)
        assert base64.b64decode(node.inputs["userData"]).decode() == expected
        assert engine.mocks.cpfs_domain not in expected, "the CPFS address travels in the job settings"


def test_user_data_is_a_plain_value_at_preview_also_with_cpfs():
    from components.cluster import user_data

    for plan in (spot_plan(), multi_node_erdma_plan()):
        assert isinstance(user_data(plan, 0), str)
        assert base64.b64decode(user_data(plan, 0)).decode() == render_user_data(plan, 0)


def test_image_is_looked_up_by_the_planned_family(engine):
    engine.declare(multi_node_erdma_plan())
    (args,) = engine.invokes("alicloud:ecs/getImages:getImages")
    assert args["imageFamily"] == "acs:alibaba_cloud_linux_3_2104_lts_x64_uefi"
    assert args["owners"] == "system"
    assert {n.inputs["imageId"] for n in engine.of_type(INSTANCE)} == {"m-wz9mockimage0000001"}


def test_a_pinned_image_is_used_as_is(engine):
    plan = single_gpu_lora_plan()
    engine.declare(plan.model_copy(update={"image": plan.image.model_copy(update={"image_id": "m-pinned123"})}))
    assert engine.invokes("alicloud:ecs/getImages:getImages") == []
    assert engine.one(INSTANCE).inputs["imageId"] == "m-pinned123"


def test_missing_image_family_is_a_clear_error(engine_factory):
    from trainstack.errors import CloudApiError

    engine = engine_factory(images=[])
    with pytest.raises(CloudApiError, match="no public image of family"):
        engine.declare(single_gpu_lora_plan())


def test_node_role_can_only_touch_the_checkpoint_and_dataset_buckets(engine):
    plan = single_gpu_lora_plan()
    plan = plan.model_copy(update={"storage": plan.storage.model_copy(update={"dataset_uri": "oss://team-data/llama/"})})
    engine.declare(plan)
    bucket = engine.result.plan.storage.oss.bucket
    role = engine.one("ram/role:Role")
    trust = json.loads(role.inputs["assumeRolePolicyDocument"])
    assert trust["Statement"] == [{"Action": "sts:AssumeRole", "Effect": "Allow",
                                   "Principal": {"Service": ["ecs.aliyuncs.com"]}}]
    oss = next(p for p in engine.of_type("ram/policy:Policy") if "oss" in p.name)
    doc = json.loads(oss.inputs["policyDocument"])
    resources = {r for s in doc["Statement"] for r in s["Resource"]}
    code = "my-team-code"  # the sample's job.code_uri bucket
    # the stack bucket by prefix: job/ read-only, checkpoints/ read/write (never the whole bucket)
    assert resources == {f"acs:oss:*:*:{bucket}", f"acs:oss:*:*:{bucket}/job/*", f"acs:oss:*:*:{bucket}/checkpoints/*",
                         f"acs:oss:*:*:{code}",
                         f"acs:oss:*:*:{code}/llama3-8b-lora/code.tar.gz", "acs:oss:*:*:team-data",
                         "acs:oss:*:*:team-data/llama/*"}
    listing = next(s for s in doc["Statement"] if "oss:ListObjects" in s["Action"] and "team-data" in s["Resource"][0])
    assert listing["Condition"] == {"StringLike": {"oss:Prefix": ["llama/*"]}}
    dataset = next(s for s in doc["Statement"] if "acs:oss:*:*:team-data" in s["Resource"])
    assert "oss:PutObject" not in dataset["Action"] and "oss:DeleteObject" not in dataset["Action"]
    job = next(s for s in doc["Statement"] if s["Resource"] == [f"acs:oss:*:*:{bucket}/job/*"])
    assert job["Action"] == ["oss:GetObject"], "a node can never change the job settings another node runs"
    assert all(not a.endswith("*") for s in doc["Statement"] for a in s["Action"])
    (attach,) = engine.of_type("ecs/ramRoleAttachment:RamRoleAttachment")
    assert attach.inputs == {"instanceId": f"instance-{engine.one(INSTANCE).name}",
                             "ramRoleName": "llama3-8b-lora-train-node"}


def test_nodes_may_stop_only_their_own_cluster(engine):
    stack = engine.declare(multi_node_erdma_plan(nodes=3))
    doc = json.loads(engine.value(stack.cluster.stop_policy.policy_document))
    (statement,) = doc["Statement"]
    assert statement["Action"] == ["ecs:StopInstance", "ecs:StopInstances"]
    assert sorted(statement["Resource"]) == sorted(f"acs:ecs:cn-shenzhen:*:instance/instance-{n.name}"
                                                   for n in engine.of_type(INSTANCE))


def test_a_later_up_does_not_restart_nodes_the_launcher_stopped(engine):
    engine.declare(single_gpu_lora_plan())
    assert "status" in engine.one(INSTANCE).ignore_changes


def test_hard_deadline_is_the_configured_release_time(engine):
    engine.declare(single_gpu_lora_plan(), auto_release_time="2031-01-31T18:00:00Z")
    assert engine.one(INSTANCE).inputs["autoReleaseTime"] == "2031-01-31T18:00:00Z"


def test_no_release_time_unless_configured(engine):
    engine.declare(single_gpu_lora_plan())
    assert "autoReleaseTime" not in engine.one(INSTANCE).inputs


def test_malformed_release_time_is_refused(engine):
    with pytest.raises(InputError, match="autoReleaseAt"):
        engine.declare(single_gpu_lora_plan(), auto_release_time="tomorrow")


def test_key_pair_only_when_declared(engine):
    engine.declare(_network(single_gpu_lora_plan(), key_pair="team-key"))
    assert engine.one(INSTANCE).inputs["keyName"] == "team-key"
