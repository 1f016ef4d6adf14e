"""TrainingStack and the program: each sample stack declares the right resources, under an
explicit provider for the profile's region, and exports what a user reads after `pulumi up`."""

import runpy
from pathlib import Path

import pulumi
import pytest
import yaml

from components.program import PROJECT_ROOT, profile_path, run_program
from plan_factory import dlc_plan, multi_node_erdma_plan, single_gpu_lora_plan, spot_plan
from trainstack.bootstrap.programs import PROGRAMS
from trainstack.errors import InputError

STACKS = PROJECT_ROOT / "stacks"

COMMON = {
    "pulumi:providers:alicloud": 1,
    "trainstack:index:TrainingStack": 1, "trainstack:index:Network": 1, "trainstack:index:Storage": 1,
    "alicloud:vpc/network:Network": 1, "alicloud:vpc/switch:Switch": 1,
    "alicloud:ecs/securityGroup:SecurityGroup": 1,
    "alicloud:oss/bucket:Bucket": 1, "alicloud:oss/bucketAcl:BucketAcl": 1,
    "alicloud:oss/bucketPublicAccessBlock:BucketPublicAccessBlock": 1,
}


def _ecs(nodes: int, sg_rules: int = 1, **extra) -> dict:
    counts = dict(COMMON)
    counts.update({
        "trainstack:index:Cluster": 1, "trainstack:index:NodeRole": 1,
        "alicloud:ecs/securityGroupRule:SecurityGroupRule": sg_rules,
        "alicloud:ecs/instance:Instance": nodes, "alicloud:ecs/ramRoleAttachment:RamRoleAttachment": nodes,
        "alicloud:ram/role:Role": 1, "alicloud:ram/policy:Policy": 4,  # OSS, status, read tags, stop
        "alicloud:ram/rolePolicyAttachment:RolePolicyAttachment": 4,
        # the job settings, and the node programs with their manifest (the same set on every plan)
        "alicloud:oss/bucketObject:BucketObject": 1 + len(PROGRAMS) + 1, "trainstack:index:JobSettings": 1,
        # the dataset cache: one standalone disk per node, attached (grown online, never ForceNew)
        "alicloud:ecs/ecsDisk:EcsDisk": nodes, "alicloud:ecs/ecsDiskAttachment:EcsDiskAttachment": nodes,
    })
    counts.update(extra)
    return counts


@pytest.mark.parametrize("plan,expected", [
    (single_gpu_lora_plan(), _ecs(1)),
    (spot_plan(), _ecs(1)),
    (multi_node_erdma_plan(), _ecs(  # checkpoints on CPFS; the bucket holds the job settings and heartbeats
        3, sg_rules=2, **{"alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet": 1,
                          # nodes' fixed IPs, the second ERIs, CPFS + NAT (random allocations)
                          "alicloud:vpc/switch:Switch": 3,
                          "alicloud:nas/fileSystem:FileSystem": 1,  # sg rules: intra-cluster + ssh from the sample
                          "alicloud:nas/protocolService:ProtocolService": 1,
                          "alicloud:nas/protocolMountTarget:ProtocolMountTarget": 1,
                          "pulumi-python:dynamic:Resource": 2})),  # CPFS export address, ERI queue pairs
], ids=["llama3-8b-lora", "qwen-7b-spot", "llama3-70b-full"])
def test_sample_plans_declare_exactly_these_resources(engine, plan, expected):
    engine.declare(plan)
    assert engine.type_counts() == expected


def test_every_resource_and_lookup_uses_the_explicit_provider_for_the_plan_region(engine):
    engine.declare(single_gpu_lora_plan(zone=None))
    provider = engine.one("pulumi:providers:alicloud")
    assert provider.inputs["region"] == "cn-shenzhen"
    custom = [r for r in engine.resources if r.custom and not r.type.startswith("pulumi:providers:")]
    assert custom and all(r.provider.startswith(provider.urn) for r in custom)
    assert engine.mocks.call_providers and all(p.startswith(provider.urn) for p in engine.mocks.call_providers)


def test_stack_attributes_expose_network_storage_and_nodes(engine):
    stack = engine.declare(multi_node_erdma_plan(nodes=3))
    assert stack.network.vpc and stack.network.vswitch and stack.network.security_group
    assert stack.storage.cpfs and stack.storage.bucket  # CPFS checkpoints; heartbeats and programs in the bucket
    assert len(stack.job_settings.programs) == len(PROGRAMS) + 1
    assert len(stack.nodes) == 3 and stack.dlc is None


def test_dlc_plan_builds_the_job_in_the_stack_network_and_no_ecs_nodes(engine, fake_dlc):
    stack = engine.declare(dlc_plan())
    (job,) = fake_dlc.instances
    assert job.plan.name == "qwen-7b-dlc" and job.plan.zone == stack.zone
    assert engine.value(job.vpc_id) == "network-qwen-7b-dlc-network-vpc"
    assert engine.value(job.vswitch_id) == "switch-qwen-7b-dlc-network-vswitch"
    assert engine.value(job.security_group_id) == "securitygroup-qwen-7b-dlc-network-sg"
    assert engine.of_type("ecs/instance:Instance") == [] and stack.nodes == []
    assert engine.of_type("trainstack:index:Cluster") == []
    assert stack.outputs["node_private_ips"] == []


# ---- the program: config -> profile -> plan -> stack -> exports ------------------------------

def _program(engine, config: dict, plan_loader):
    pulumi.runtime.set_all_config(config)
    return engine.run(lambda: run_program(plan_loader=plan_loader))


def test_program_exports_what_the_user_reads_after_up(engine):
    plan = single_gpu_lora_plan()
    exports = _program(engine, {"trainstack:profile": "profiles/llama3-8b-lora.yaml"}, lambda profile: plan)
    assert exports["instance_type"] == "ecs.gn7i-c8g1.2xlarge"
    assert exports["gpu_model"] == "A10"
    assert exports["nodes"] == 1
    assert exports["node_private_ips"] == ["10.0.0.10"]
    assert exports["zone"] == plan.zone
    name = exports["oss_bucket"]  # the profile name and a digest of account, project, stack and region
    assert name.startswith("llama3-8b-lora-") and name != plan.storage.oss.bucket
    assert exports["mount_points"]["checkpoints"] == "/mnt/checkpoints"
    assert (exports["hourly_cost_cny"], exports["estimated_hours"], exports["total_cost_cny"]) == \
        (plan.hourly_cost_cny, plan.estimated_hours, plan.total_cost_cny)
    assert exports["plan_summary"] == plan.summary()
    root = pulumi.runtime.get_root_resource()
    assert root is not None


def test_program_reads_the_profile_named_in_stack_config(engine):
    seen = []
    _program(engine, {"trainstack:profile": "profiles/llama3-70b-full.yaml"},
             lambda profile: seen.append(profile) or multi_node_erdma_plan())
    assert seen[0].name == "llama3-70b-full" and seen[0].training.zero_stage == 3


def test_zone_override_from_stack_config_reaches_the_resolver(engine):
    seen = []
    _program(engine, {"trainstack:profile": "profiles/llama3-8b-lora.yaml", "trainstack:zone": "cn-shenzhen-f"},
             lambda profile: seen.append(profile) or single_gpu_lora_plan(zone=profile.zone))
    assert seen[0].zone == "cn-shenzhen-f"
    assert engine.one("vpc/switch:Switch").inputs["zoneId"] == "cn-shenzhen-f"


def test_zone_override_outside_the_region_is_a_profile_error(engine):
    with pytest.raises(InputError):
        _program(engine, {"trainstack:profile": "profiles/llama3-8b-lora.yaml", "trainstack:zone": "cn-beijing-a"},
                 lambda profile: single_gpu_lora_plan())


def test_conflicting_alicloud_region_is_an_error(engine):
    with pytest.raises(InputError, match="alicloud:region is cn-beijing but the profile llama3-8b-lora is for cn-shenzhen"):
        _program(engine, {"trainstack:profile": "profiles/llama3-8b-lora.yaml", "alicloud:region": "cn-beijing"},
                 lambda profile: single_gpu_lora_plan())


def test_matching_alicloud_region_is_fine(engine):
    _program(engine, {"trainstack:profile": "profiles/llama3-8b-lora.yaml", "alicloud:region": "cn-shenzhen"},
             lambda profile: single_gpu_lora_plan())
    assert engine.one("pulumi:providers:alicloud").inputs["region"] == "cn-shenzhen"


def test_missing_profile_file_is_an_input_error(engine):
    with pytest.raises(InputError, match="profile file not found"):
        _program(engine, {"trainstack:profile": "profiles/nope.yaml"}, lambda profile: single_gpu_lora_plan())


def test_release_deadline_comes_from_stack_config(engine):
    _program(engine, {"trainstack:profile": "profiles/llama3-8b-lora.yaml",
                      "trainstack:autoReleaseAt": "2031-01-31T18:00:00Z"}, lambda profile: single_gpu_lora_plan())
    assert engine.one("ecs/instance:Instance").inputs["autoReleaseTime"] == "2031-01-31T18:00:00Z"


def test_profile_path_is_relative_to_stacks_or_absolute(tmp_path):
    assert profile_path("profiles/x.yaml") == STACKS / "profiles" / "x.yaml"
    assert profile_path(str(STACKS / "profiles" / "x.yaml")) == STACKS / "profiles" / "x.yaml"
    with pytest.raises(InputError, match="outside stacks"):
        profile_path(str(tmp_path / "p.yaml"))


def test_main_turns_a_user_mistake_into_a_pulumi_error(engine):
    pulumi.runtime.set_all_config({"trainstack:profile": "profiles/llama3-8b-lora.yaml", "alicloud:region": "cn-beijing"})
    with pytest.raises(pulumi.RunError, match="alicloud:region is cn-beijing"):
        engine.run(lambda: runpy.run_path(str(PROJECT_ROOT / "__main__.py")))


# ---- the sample stacks in stacks/ -----------------------------------------------------------

def _stack_files():
    return sorted(STACKS.glob("Pulumi.*.yaml"))


def test_sample_stacks_exist_for_lora_multi_node_and_spot():
    names = {p.name for p in _stack_files()}
    assert {"Pulumi.llama3-8b-lora.yaml", "Pulumi.llama3-70b-full.yaml", "Pulumi.qwen-7b-spot.yaml"} <= names


@pytest.mark.parametrize("stack_file", _stack_files(), ids=lambda p: p.name)
def test_sample_stack_config_names_an_existing_valid_profile(stack_file: Path):
    from trainstack.profile import load_profile

    config = yaml.safe_load(stack_file.read_text())["config"]
    profile = load_profile(profile_path(config["trainstack:profile"]))
    assert f"Pulumi.{profile.name}.yaml" == stack_file.name
    assert "alicloud:region" not in config or config["alicloud:region"] == profile.region


@pytest.mark.parametrize("stack_file", _stack_files(), ids=lambda p: p.name)
def test_sample_stack_deploys_with_the_real_resolver(engine, fake_dlc, stack_file: Path):
    """The real program on each sample stack."""
    config = yaml.safe_load(stack_file.read_text())["config"]
    pulumi.runtime.set_all_config({k: str(v) for k, v in config.items()})
    exports = engine.run(lambda: run_program())
    nodes = engine.of_type("ecs/instance:Instance")
    if exports["target"] == "dlc":
        assert nodes == [] and len(fake_dlc.instances) == 1
        return
    groups = engine.of_type("ess/scalingGroup:ScalingGroup")
    pooled = sum(int(g.inputs["maxSize"]) for g in groups)
    assert len(nodes) + pooled == exports["nodes"] >= 1  # a self-healing plan's pool holds the rest
    assert {n.inputs["instanceType"] for n in nodes} <= {exports["instance_type"]}
    assert sorted(n.inputs["privateIp"] for n in nodes) == sorted(exports["node_private_ips"])
    assert {n.inputs["tags"]["trainstack:zone"] for n in nodes} <= {exports["zone"]}
    spot = exports["plan_summary"]["spot"]
    anchored = bool(pooled and nodes)  # node 0 of a multi-node self-healing plan is on-demand
    assert {n.inputs["spotStrategy"] for n in nodes} <= {"NoSpot" if anchored or not spot else "SpotWithPriceLimit"}
    configs = engine.of_type("kind:ess-scaling-configuration")  # components/ess_pool.py (issue 33)
    assert len(configs) == len(groups)
    for config in configs:
        assert config.inputs["spotStrategy"] == "SpotWithPriceLimit" and spot
    if spot:
        assert engine.of_type("ecs/ecsDeploymentSet:EcsDeploymentSet") == []


def test_dlc_plan_with_the_real_dlc_component(engine):
    """The constructor contract with components/dlc.py holds."""
    stack = engine.declare(dlc_plan())
    assert engine.of_type("ecs/instance:Instance") == []
    (job,) = engine.of_type("trainstack:index:DlcTraining")
    assert job.parent == engine.one("trainstack:index:TrainingStack").urn
    assert stack.dlc is not None
