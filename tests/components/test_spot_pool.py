"""Self-healing spot pools: an ESS scaling group + scaling configuration instead of ECS instances,
only for 1-node spot plans with ``spot_pool``; everything else keeps plain instances."""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from plan_factory import multi_node_erdma_plan, single_gpu_lora_plan, spot_plan, spot_pool_plan

from trainstack.bootstrap import render_user_data
from components.cluster import render_user_data_b64
from policies.runner import run_policies
from trainstack.cli import main
from trainstack.errors import InputError
from trainstack.plan import CpfsPlan, SpotPoolPlan, StoragePlan
from trainstack.tags import planned_price, price_text

from conftest import ACCOUNT_ID

GROUP = "ess/scalingGroup:ScalingGroup"
CONFIG = "kind:ess-scaling-configuration"  # components/ess_pool.py over the ESS API
CONFIG_TYPE = "pulumi-python:dynamic:Resource"
INSTANCE = "ecs/instance:Instance"
ESS_PREFIX = "alicloud:ess/"

PROFILE = {
    "name": "qwen-7b-heal", "region": "cn-shenzhen", "model": {"preset": "qwen2.5-7b"},
    "training": {"method": "full", "precision": "bf16-mixed", "micro_batch_size": 2, "sequence_length": 2048,
                 "gradient_checkpointing": True, "zero_stage": 2, "tokens": 1.0e8},
    "job": {"command": "python train.py --resume-from-latest /mnt/checkpoints"},
    "resources": {"target": "ecs", "gpus": 4, "spot": "require", "objective": "cost", "max_total_cost": 5000,
                  "self_healing": True},
    "storage": {"dataset_gib": 300, "checkpoint": "oss"},
    "tags": {"team": "nlp"},
}


def test_a_self_healing_plan_is_one_scaling_group_and_configuration_and_no_instance(engine):
    engine.declare(spot_pool_plan())
    assert engine.of_type(INSTANCE) == []
    group, config = engine.one(GROUP), engine.one(CONFIG)
    assert config.inputs["scalingGroupId"] == f"scalinggroup-{group.name}"
    assert not engine.of_type("ecs/ramRoleAttachment:RamRoleAttachment")
    assert not engine.of_type("ecs/ecsDeploymentSet:EcsDeploymentSet")


def test_the_group_keeps_one_spot_node_and_replaces_it_on_reclaim(engine):
    engine.declare(spot_pool_plan())
    g = engine.one(GROUP).inputs
    # min 0: the pool's one scaling rule takes it to 0 at the job's end (nothing bills after the job)
    assert (g["minSize"], g["maxSize"], g["desiredCapacity"]) == (0, 1, 1)
    assert g["multiAzPolicy"] == "COST_OPTIMIZED"
    assert g["onDemandBaseCapacity"] == 0 and g["onDemandPercentageAboveBaseCapacity"] == 0
    assert g["spotInstanceRemedy"] is True
    assert g["compensateWithOnDemand"] is False  # spot: require never falls back to on-demand
    assert g["groupDeletionProtection"] is False
    assert g["removalPolicies"] == ["OldestScalingConfiguration", "OldestInstance"]
    assert g["vswitchIds"] == ["switch-qwen-7b-spot-network-vswitch"]
    assert g["tags"] == {"team": "nlp", "trainstack:name": "qwen-7b-spot", "trainstack:zone": engine.result.zone}


def test_on_demand_compensation_and_base_follow_the_plan(engine):
    engine.declare(spot_pool_plan(spot_pool=SpotPoolPlan(price_limit=138.96, compensate_with_on_demand=True)))
    g = engine.one(GROUP).inputs
    assert g["compensateWithOnDemand"] is True and g["onDemandBaseCapacity"] == 0


def test_the_configuration_bids_the_plan_price_as_the_instance_path_would(engine):
    engine.declare(spot_pool_plan())
    c = engine.one(CONFIG).inputs
    assert c["instanceType"] == "ecs.gn7e-c16g1.16xlarge"
    assert c["spotStrategy"] == "SpotWithPriceLimit"
    # ESS takes 2 decimals: the plan's 138.966 is rounded down, never up
    assert c["spotPriceLimits"] == [{"instanceType": "ecs.gn7e-c16g1.16xlarge", "priceLimit": 138.96}]
    assert c["spotDuration"] == 1
    assert (c["active"], c["enable"], c["forceDelete"]) == (True, True, True)


def test_the_configuration_has_encrypted_essd_disks_no_public_ip_and_the_node_role(engine):
    engine.declare(spot_pool_plan())
    c = engine.one(CONFIG).inputs
    assert (c["systemDiskCategory"], c["systemDiskPerformanceLevel"], c["systemDiskSize"]) == ("cloud_essd", "PL1", 200)
    assert c["systemDiskEncrypted"] is True
    disk = spot_pool_plan().storage.data_disk
    assert c["dataDisks"] == [{"category": "cloud_essd", "performanceLevel": disk.performance_level,
                               "size": disk.size_gib, "encrypted": True, "deleteWithInstance": True,
                               "name": "qwen-7b-spot-node-0-data"}]
    assert c["internetMaxBandwidthOut"] == 0
    assert c["httpEndpoint"] == "enabled"
    assert c["securityGroupIds"] == ["securitygroup-qwen-7b-spot-network-sg"]
    assert c["roleName"] == "qwen-7b-spot-train-node"
    assert engine.one("ram/role:Role").inputs["roleName"] == "qwen-7b-spot-train-node"
    # the role (and its OSS policy) exist before a node can launch with it
    deps = set(engine.one(CONFIG).dependencies)
    assert {r.urn for r in engine.of_type("ram/rolePolicyAttachment:RolePolicyAttachment")} <= deps


def test_the_configuration_carries_the_training_node_markers(engine):
    stack = engine.declare(spot_pool_plan())
    assert engine.one(CONFIG).inputs["tags"] == {
        "team": "nlp", "trainstack:name": "qwen-7b-spot", "trainstack:role": "training",
        "trainstack:zone": engine.result.zone, "trainstack:node-rank": "0", "trainstack:gpus-per-node": "4",
        "trainstack:gpu-model": "A100-80G", "trainstack:job-settings": stack.job_settings.digest,
        "trainstack:planned-price": price_text(planned_price(stack.plan)),  # the budget policy's channel
        "trainstack:scale-to-zero": rule_ari(engine)}


def test_the_configuration_boots_the_same_bootstrap_on_loopback_without_a_billing_stop(engine):
    engine.declare(spot_pool_plan())
    plan = engine.result.plan  # with the stack bucket's deploy-time name
    user_data = engine.one(CONFIG).inputs["userData"]
    assert user_data == render_user_data_b64(plan, 0)
    text = base64.b64decode(user_data).decode()
    assert text == render_user_data(plan, 0)
    files = {f["path"]: f for f in yaml.safe_load(text)["write_files"]}
    assert "/etc/trainstack/hostfile" not in files  # job settings channel
    settings = json.loads(engine.value(engine.result.job_settings.object.content))["shared"]
    assert settings["hostfile"] == "127.0.0.1\n"
    assert "MASTER_ADDR=127.0.0.1\n" in settings["settings.env"] and "NNODES=1\n" in settings["settings.env"]
    env = files["/etc/trainstack/node.env"]["content"]
    # it never stops or powers off itself (ESS would replace it): at the job's end it scales its pool to 0
    assert "POOL_ROLE=single\n" in env and "POWEROFF_FALLBACK=0\n" in env
    assert "SCALE_RULE_TAG=trainstack:scale-to-zero\n" in env
    assert "/etc/systemd/system/trainstack-spot-watcher.service" in files


def test_no_stop_instance_permission_for_a_pool(engine):
    engine.declare(spot_pool_plan())
    docs = [json.loads(p.inputs["policyDocument"]) for p in engine.of_type("ram/policy:Policy")]
    actions = {a for d in docs for s in d["Statement"] for a in s["Action"]}
    # reading its own job-settings tag is the only ECS action (the API has no resource-level authorization)
    assert {a for a in actions if a.startswith("ecs:")} == {"ecs:ListTagResources"}
    assert all(r != "*" for d in docs for s in d["Statement"] for r in s["Resource"]
               if s["Action"] != ["ecs:ListTagResources"])


def test_a_cpfs_pool_renders_the_mount_address_into_user_data(engine):
    plan = spot_pool_plan(storage=StoragePlan(checkpoint="cpfs", checkpoint_path="/mnt/cpfs/checkpoints",
                                              cpfs=CpfsPlan(capacity_gib=3600), oss=spot_plan().storage.oss),
                          network=spot_plan().network.model_copy(update={  # CPFS takes random addresses
                              "services_vswitch_cidr": multi_node_erdma_plan().network.services_vswitch_cidr}))
    engine.declare(plan)
    text = base64.b64decode(engine.one(CONFIG).inputs["userData"]).decode()
    assert "cpfs-0123abcd-mock" not in text, "the mount address travels in the job settings"
    settings = json.loads(engine.value(engine.result.job_settings.object.content))["shared"]
    assert "CPFS_SOURCE=cpfs-0123abcd-mock" in settings["settings.env"]


def test_exports_have_the_group_and_no_fixed_ips(engine):
    stack = engine.declare(spot_pool_plan())
    out = engine.value(stack.outputs)
    assert out["node_private_ips"] == [] and out["node_ids"] == []
    assert out["scaling_group_id"] == "scalinggroup-qwen-7b-spot-pool-group"


@pytest.mark.parametrize("plan", [spot_plan(), single_gpu_lora_plan(), multi_node_erdma_plan(),
                                  spot_plan(nodes=2, total_gpus=8)], ids=["spot", "on-demand", "multi-node", "spot-2"])
def test_plans_without_spot_pool_create_no_ess_resources(engine, plan):
    stack = engine.declare(plan)
    assert not [r for r in engine.resources if r.type.startswith(ESS_PREFIX)]
    assert len(engine.of_type(INSTANCE)) == plan.nodes
    assert "scaling_group_id" not in stack.outputs


def test_a_spot_pool_needs_a_spot_plan_and_holds_its_nodes():
    with pytest.raises(ValueError, match="needs an ECS spot plan"):
        single_gpu_lora_plan(spot_pool=SpotPoolPlan(price_limit=9.0))
    with pytest.raises(ValueError, match="holds 1 node"):
        spot_pool_plan(nodes=2, total_gpus=8)
    with pytest.raises(ValueError, match="1-node plan's single node"):
        SpotPoolPlan(price_limit=9.0, min_size=2, max_size=2)


def test_a_pool_refuses_checkpoints_on_essd(engine):
    plan = spot_pool_plan(storage=StoragePlan(checkpoint="essd", checkpoint_path="/mnt/checkpoints",
                                              data_disk=spot_plan().storage.data_disk,
                                              checkpoint_disk=spot_plan().storage.data_disk.model_copy(
                                                  update={"holds_checkpoints": True}),
                                              oss=spot_plan().storage.oss))
    with pytest.raises(InputError, match="cannot keep checkpoints on ESSD"):
        engine.declare(plan)


# ---- the resolver and the policy pack, end to end through `trainstack plan` -----------------------

def _plan_json(tmp_path, capsys, profile):
    path = tmp_path / f"{profile['name']}.yaml"
    path.write_text(yaml.safe_dump(profile))
    code = main(["plan", str(path), "--format", "json"])
    out = capsys.readouterr()
    assert code == 0, out.err
    return json.loads(out.out)


def test_offline_plan_of_a_self_healing_profile_passes_every_mandatory_policy(tmp_path, capsys):
    doc = _plan_json(tmp_path, capsys, PROFILE)
    types = [r["type"] for r in doc["resources"]]
    assert types.count("alicloud:" + GROUP) == 1 and types.count(CONFIG_TYPE) == 1
    assert "alicloud:" + INSTANCE not in types
    assert doc["plan"]["spot_pool"]["price_limit"] == 138.96
    assert [v for v in doc["policy"] if v["level"] == "mandatory"] == []
    assert not [v for v in doc["policy"] if "can't run policy" in v["message"]]


def _policy_resources(doc):
    return [{"type": r["type"], "name": r["name"], "urn": r["urn"], "inputs": r["inputs"], "parent": r["parent"],
             "protect": r["protect"], "dependencies": r["dependencies"], "provider_region": "cn-shenzhen"}
            for r in doc["resources"] if not r["type"].startswith("pulumi:")]


def _config_inputs(resources):
    return next(r["inputs"] for r in resources if r["inputs"].get("kind") == "ess-scaling-configuration")


def _mandatory(resources):
    return {(v["policy"], v["resource"]) for v in run_policies(resources) if v["level"] == "mandatory"}


def test_policies_judge_the_scaling_configuration(tmp_path, capsys):
    base = _policy_resources(_plan_json(tmp_path, capsys, PROFILE))
    config = next(r["name"] for r in base if r["inputs"].get("kind") == "ess-scaling-configuration")
    assert _mandatory(base) == set()

    pcie = json.loads(json.dumps(base))
    _config_inputs(pcie)["instanceType"] = "ecs.ebmgn7i.32xlarge"  # 4 A10 on PCIe only
    assert ("no-pcie-multi-gpu-training", config) in _mandatory(pcie)

    unknown = json.loads(json.dumps(base))
    _config_inputs(unknown)["instanceType"] = "ecs.gn7i-c8g1.24xlarge"  # does not exist
    assert ("known-instance-type", config) in _mandatory(unknown)

    small = json.loads(json.dumps(base))
    _config_inputs(small)["dataDisks"][0].update(performanceLevel="PL2", size=100)
    assert ("essd-minimum-size", config) in _mandatory(small)

    no_storage = [r for r in json.loads(json.dumps(base)) if not r["type"].startswith("alicloud:oss/")]
    verdicts = [v for v in run_policies(no_storage) if v["policy"] == "spot-requires-checkpoint-storage"]
    assert len(verdicts) == 1 and verdicts[0]["level"] == "mandatory" and config in verdicts[0]["message"]


def test_the_offline_plan_draws_the_pool_in_the_topology(tmp_path, capsys):
    path = tmp_path / "heal.yaml"
    path.write_text(yaml.safe_dump(PROFILE))
    assert main(["plan", str(path), "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "ESS spot pool qwen-7b-heal-pool-config · 1 x ecs.gn7e-c16g1.16xlarge · spot ≤ 138.96 CNY/h" in out
    assert "self-healing: an ESS scaling group keeps 1 spot node running" in out


# --- multi-node self-healing (issue 23): node 0 on-demand at its fixed IP, the pool the other nodes --------

def elastic_plan(nodes=3):
    """The 70B sample on ``nodes`` eRDMA nodes, spot allowed, self-healing (CPFS checkpoints)."""
    return multi_node_erdma_plan(nodes, profile={"resources": {"spot": "allow", "self_healing": True,
                                                               "max_hourly_cost": 220 * nodes}})


def user_data_text(inputs):
    return base64.b64decode(inputs["userData"]).decode()


def test_a_multi_node_plan_is_node_0_on_demand_plus_a_pool_of_the_others(engine):
    plan = elastic_plan()
    engine.declare(plan)
    [node] = engine.of_type(INSTANCE)
    assert node.inputs["spotStrategy"] == "NoSpot" and "spotPriceLimit" not in node.inputs
    assert node.inputs["privateIp"] == plan.node_private_ips()[0] and node.inputs["httpTokens"] == "required"
    g = engine.one(GROUP).inputs
    assert (g["minSize"], g["maxSize"], g["desiredCapacity"]) == (0, 2, 2)
    assert g["vswitchIds"] == [f"switch-{plan.name}-network-pool-vswitch"]  # never the fixed-IP vSwitch
    assert g["compensateWithOnDemand"] is True and g["spotInstanceRemedy"] is True
    [pool_vswitch] = [s for s in engine.of_type("vpc/switch:Switch") if s.name.endswith("-pool-vswitch")]
    assert pool_vswitch.inputs["cidrBlock"] == plan.network.pool_vswitch_cidr
    c = engine.one(CONFIG).inputs
    assert c["spotStrategy"] == "SpotWithPriceLimit" and c["instanceType"] == plan.instance_type
    # eRDMA through the ESS API: a Standard primary and a HighPerformance (ERI) secondary interface, each in
    # the cluster security group, in place of SecurityGroupIds; IMDSv2 only
    sg = f"securitygroup-{plan.name}-network-sg"
    assert "securityGroupIds" not in c and c["networkInterfaces"] == [
        {"instanceType": "Primary", "networkInterfaceTrafficMode": "Standard", "securityGroupIds": [sg]},
        {"instanceType": "Secondary", "networkInterfaceTrafficMode": "HighPerformance", "securityGroupIds": [sg]}]
    assert c["httpTokens"] == "required" and c["httpEndpoint"] == "enabled"
    assert c["tags"]["trainstack:node-rank"] == "pool"


def test_the_anchor_and_the_pool_boot_the_elastic_files(engine):
    plan = elastic_plan()
    engine.declare(plan)
    anchor = user_data_text(engine.one(INSTANCE).inputs)
    pool = user_data_text(engine.one(CONFIG).inputs)
    deployed = engine.result.plan  # with the stack bucket's deploy-time name
    assert anchor == render_user_data(deployed, 0) and pool == render_user_data(deployed, 1)
    assert "STATUS_PER_INSTANCE=1" in pool and "STATUS_PER_INSTANCE" not in anchor
    # node 0 stops itself at the end; a pool node executes the scale-to-0 rule instead
    assert "POOL_ROLE=pool" in pool and "POOL_ROLE=anchor" in anchor


def test_only_node_0_may_be_stopped_and_the_pool_reports_under_its_own_prefix(engine):
    plan = elastic_plan()
    engine.declare(plan)
    stop = json.loads(engine.value(engine.result.cluster.stop_policy.policy_document))
    [statement] = stop["Statement"]
    assert len(statement["Resource"]) == 1  # the anchor alone: a pool node never stops itself
    status = next(p for p in engine.of_type("ram/policy:Policy") if p.name.endswith("identity-status"))
    resources = json.loads(status.inputs["policyDocument"])["Statement"][0]["Resource"]
    assert any(r.endswith(f"/status/{plan.name}-pool/*") for r in resources)
    assert any(r.endswith(f"/status/{plan.name}-node-0/*") for r in resources)


def test_a_later_up_that_grows_the_cluster_keeps_node_0_and_resizes_the_pool(engine_factory):
    """Day two: 3 -> 4 nodes changes the pool's size in place; node 0, its IP and the vSwitches stay."""
    before = engine_factory()
    before.declare(elastic_plan(3))
    after = engine_factory()
    after.declare(elastic_plan(4))
    node_0 = [e.one(INSTANCE).inputs for e in (before, after)]
    # the job settings digest (tag) follows the new node count; user data is ignored after creation
    assert [{k: v for k, v in n.items() if k not in ("userData", "tags")} for n in node_0] == [
        {k: v for k, v in node_0[0].items() if k not in ("userData", "tags")}] * 2
    assert after.one(GROUP).inputs["maxSize"] == 3
    for s in before.of_type("vpc/switch:Switch"):
        assert after.by_urn(s.urn).inputs["cidrBlock"] == s.inputs["cidrBlock"]


# --- issue 33: nothing bills after the job; issue 31 item 3: the cluster never splits ----------------------

def rule_ari(engine):
    return f"ari:acs:ess:cn-shenzhen:{ACCOUNT_ID}:scalingrule/asr-{engine.one('ess/scalingRule:ScalingRule').name}"


def _actions(doc):
    return {a for s in doc["Statement"] for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])}


@pytest.mark.parametrize("make", [spot_pool_plan, elastic_plan], ids=["one-node", "multi-node"])
def test_the_pool_scales_to_0_through_its_one_rule_and_a_permission_on_its_group_alone(engine, make):
    plan = make()
    engine.declare(plan)
    group = engine.one(GROUP)
    rule = engine.one("ess/scalingRule:ScalingRule").inputs
    assert (rule["scalingGroupId"], rule["adjustmentType"], rule["adjustmentValue"]) == (
        f"scalinggroup-{group.name}", "TotalCapacity", 0)
    [scale] = [p for p in engine.of_type("ram/policy:Policy") if p.name.endswith("scale-to-zero")]
    doc = json.loads(scale.inputs["policyDocument"])
    assert doc["Statement"] == [{"Effect": "Allow", "Action": ["ess:ExecuteScalingRule"],
                                 "Resource": [f"acs:ess:{plan.region}:*:scalinggroup/scalinggroup-{group.name}"]}]
    attached = [a.inputs for a in engine.of_type("ram/rolePolicyAttachment:RolePolicyAttachment")
                if a.inputs["policyName"] == scale.inputs["policyName"]]
    assert len(attached) == 1 and attached[0]["roleName"].endswith("-train-node")
    # no node role may resize or reconfigure the group itself
    every = set().union(*(_actions(json.loads(p.inputs["policyDocument"])) for p in engine.of_type("ram/policy:Policy")))
    assert {a for a in every if a.startswith("ess:")} == {"ess:ExecuteScalingRule"}
    config = engine.one(CONFIG)
    # the rule's ARI (known at deploy time) is the tag a pool node's agent reads to scale its pool to 0
    assert config.inputs["tags"]["trainstack:scale-to-zero"] == rule_ari(engine)
    pool_grants = {r.urn for r in engine.of_type("ram/rolePolicyAttachment:RolePolicyAttachment")
                   if not r.name.endswith("stop-own-instances")}  # node 0's StopInstance on itself
    assert pool_grants <= set(config.dependencies)  # every grant exists before a pool node launches


def test_the_settings_every_node_trusts_are_writable_by_the_deploy_identity_alone(engine):
    """The digest (and each generation under job/settings/) lives under job/: no node role may write there."""
    plan = elastic_plan()
    engine.declare(plan)
    bucket = engine.result.plan.storage.oss.bucket
    job = engine.result.plan.storage.oss.job_prefix
    writes = {"oss:PutObject", "oss:DeleteObject", "oss:AppendObject", "oss:PutObjectAcl", "oss:*", "*",
              "oss:CopyObject", "oss:RestoreObject", "oss:PutObjectTagging", "oss:AbortMultipartUpload"}
    for p in engine.of_type("ram/policy:Policy"):
        for s in json.loads(p.inputs["policyDocument"])["Statement"]:
            actions = set(s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
            if not actions & writes:
                continue
            for r in s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]:
                covered = r.split(f"{bucket}/", 1)[-1] if f"{bucket}/" in r else None
                assert covered is None or not (f"{job}settings".startswith(covered.rstrip("*"))
                                               or covered.startswith(job)), (p.name, r)
    [generation] = [o for o in engine.of_type("oss/bucketObject:BucketObject") if o.name.endswith("-generation")]
    assert generation.inputs["acl"] == "private"
    digest = engine.value(engine.result.job_settings.digest)
    assert generation.inputs["key"] == f"{job}settings/{digest}.json"
