"""The exact PAI-DLC CreateJob body a plan turns into (built through the installed SDK models)."""

from __future__ import annotations

import json

import pytest
from alibabacloud_pai_dlc20201203 import models as dlc_models

from plan_factory import ERDMA_NCCL, dlc_plan, dlc_quota_plan
from trainstack import dlc_job as j
from trainstack.cloud import dlc_request as r
from trainstack.errors import InputError
from trainstack.plan import JobPlan

REGION = "cn-shenzhen"
TAG = "2.1-gpu-py310-cu121-ubuntu22.04"
IMAGE = f"dsw-registry-vpc.cn-shenzhen.cr.aliyuncs.com/pai/pytorch-training:{TAG}"
NET = dict(vpc_id="vpc-wz9abc", vswitch_id="vsw-wz9abc", security_group_id="sg-wz9abc")
#: what every JobSpec.to_map() carries besides the fields set
EMPTY_SPEC_LISTS = {"ElasticSpotSpecs": [], "LocalMountSpecs": [], "StartupDependencies": []}
USER_VPC = {"VpcId": "vpc-wz9abc", "SwitchId": "vsw-wz9abc", "SecurityGroupId": "sg-wz9abc",
            "ExtendedCIDRs": ["10.0.0.0/16"]}
#: the official image pinned by tag (the sample profile uses the team's own image)
PINNED = {"job": {"image": None}, "dlc": {"image_tag": TAG}}


def _dlc(plan, **update):
    """A hand edit of the DLC block: only for reactions to plans the resolver does not make."""
    return plan.model_copy(update={"dlc": plan.dlc.model_copy(update=update)})


def single_gpu_plan():
    """The resolver's plan for the sample on one public-resource A10 pod, official image pinned."""
    return dlc_plan(profile={"job": {"image": None, "command": "python train.py --lora", "max_runtime_hours": 10},
                             "dlc": {"image_tag": TAG}})


def quota_rdma_plan():
    """The resolver's plan for a 32-GPU job on a quota of ebmgn7ex nodes (4 pods, eRDMA)."""
    return dlc_quota_plan(profile={**PINNED, "job": {"image": None, "max_runtime_hours": 48}})


def spot_plan():
    """The resolver's spot plan (``resources.spot: require``): the limit is the spec's on-demand price."""
    return dlc_plan(profile={**PINNED, "resources": {"spot": "require"}})


def test_single_gpu_public_resource_job_exact_body():
    plan = single_gpu_plan()
    assert plan.dlc.ecs_spec == "ecs.gn7i-c8g1.2xlarge" and plan.dlc.image == IMAGE
    body = r.build_create_job_request(
        plan, workspace_id="ws-123", **NET,
        data_sources=[{"data_source_id": "d-ckpt", "mount_path": "/mnt/data/checkpoints", "mount_access": "RW"}])
    assert body == {
        "CustomEnvs": [],
        "DataSources": [{"DataSourceId": "d-ckpt", "MountPath": "/mnt/data/checkpoints", "MountAccess": "RW"}],
        "DisplayName": "qwen-7b-dlc",
        "JobMaxRunningTimeMinutes": 600,
        "JobSpecs": [{"Type": "Worker", "PodCount": 1, "EcsSpec": "ecs.gn7i-c8g1.2xlarge", "Image": IMAGE,
                      **EMPTY_SPEC_LISTS}],
        "JobType": "PyTorchJob",
        # python under torchrun, with PAI's pod topology (WORLD_SIZE pods, RANK = pod index)
        "UserCommand": ('torchrun --nnodes "${WORLD_SIZE:-1}" --nproc-per-node 1 --node-rank "${RANK:-0}" '
                        '--master-addr "${MASTER_ADDR:-127.0.0.1}" --master-port "${MASTER_PORT:-29500}" '
                        "--rdzv-conf timeout=1800 train.py --lora"),
        "UserVpc": USER_VPC,
        "WorkspaceId": "ws-123",
    }
    # no envs planned -> no Envs; a public-resource job has no quota, RDMA or spot fields
    assert "ResourceId" not in body and "Settings" not in body and "SpotSpec" not in body["JobSpecs"][0]


def test_multi_worker_quota_job_with_rdma_exact_body():
    plan = quota_rdma_plan()
    # pod CPU and memory: the GPU share of the quota's node (8 of 8 GPUs of ebmgn7ex.32xlarge: 128 vCPU, 1,024 GiB)
    assert (plan.dlc.cpu_per_pod, plan.dlc.memory_gib_per_pod) == (128, 1024)
    assert plan.estimated_hours is not None and plan.dlc.quota_kind == "general"
    body = r.build_create_job_request(plan, workspace_id="ws-123", **NET, data_sources=[])
    assert body == {
        "CustomEnvs": [],
        "DataSources": [],
        "DisplayName": "qwen-7b-dlc",
        "Envs": {**ERDMA_NCCL, "WANDB_PROJECT": "llama3"},
        "JobMaxRunningTimeMinutes": 2880,
        "JobSpecs": [{"Type": "Worker", "PodCount": 4, "Image": IMAGE,
                      "ResourceConfig": {"GPU": "8", "CPU": "128", "Memory": "1024Gi"}, **EMPTY_SPEC_LISTS}],
        "JobType": "PyTorchJob",
        "ResourceId": "quotaabc123",
        "Settings": {"EnableRDMA": True},
        # the user's --nnodes 4 --nproc-per-node 8 agree with the plan: trainstack writes its own
        "UserCommand": ('torchrun --nnodes "${WORLD_SIZE:-1}" --nproc-per-node 8 --node-rank "${RANK:-0}" '
                        '--master-addr "${MASTER_ADDR:-127.0.0.1}" --master-port "${MASTER_PORT:-29500}" '
                        "--rdzv-conf timeout=1800 train.py"),
        "UserVpc": USER_VPC,
        "WorkspaceId": "ws-123",
    }
    assert "EcsSpec" not in body["JobSpecs"][0]


def test_spot_job_bids_per_minute_price_limit():
    plan = spot_plan()
    limit = plan.dlc.spot_price_limit
    assert plan.dlc.spot and limit == 9.532  # the spec's ECS on-demand list price (no DLC price known), 3 decimals
    body = r.build_create_job_request(plan, workspace_id="ws-1", vpc_id=None, vswitch_id=None,
                                      security_group_id=None, data_sources=[])
    spec = body["JobSpecs"][0]
    # 9.532 CNY/h per pod -> 0.1588 CNY/min (rounded down, never above the hourly limit)
    assert spec["SpotSpec"] == {"SpotStrategy": "SpotWithPriceLimit", "SpotPriceLimit": 0.1588}
    assert "UseSpotInstance" not in spec  # deprecated in the API reference
    assert spec["EcsSpec"] == plan.dlc.ecs_spec and spec["PodCount"] == 1
    assert "UserVpc" not in body
    assert body["JobMaxRunningTimeMinutes"] == plan.job.max_runtime_hours * 60  # job.max_runtime_hours


def test_spot_limit_falls_back_to_the_plans_hourly_limit_and_is_required():
    plan = _dlc(dlc_plan(spot=True, spot_price_limit=60.0), image=IMAGE, spot=True, spot_price_limit=None)
    body = r.build_create_job_request(plan, workspace_id="ws-1", vpc_id=None, vswitch_id=None,
                                      security_group_id=None, data_sources=[])
    assert body["JobSpecs"][0]["SpotSpec"]["SpotPriceLimit"] == 1.0
    with pytest.raises(InputError, match="spot DLC job without a price limit"):
        j.job_inputs(_dlc(dlc_plan(), image=IMAGE, spot=True))


def test_body_round_trips_through_the_sdk_model():
    body = r.build_create_job_request(quota_rdma_plan(), workspace_id="ws-123", **NET, data_sources=[])
    assert dlc_models.CreateJobRequest().from_map(body).to_map() == body


def test_max_running_minutes_falls_back_to_job_max_runtime_hours():
    plan = _dlc(dlc_plan(job=JobPlan(command="python train.py", method="lora", precision="bf16",
                                     max_runtime_hours=1.5)), image=IMAGE, max_running_minutes=None)
    assert j.job_inputs(plan)["max_running_minutes"] == 90


def test_job_inputs_are_plain_values_policies_can_judge():
    inputs = j.job_inputs(quota_rdma_plan())
    assert inputs["kind"] == "pai-dlc-job"
    assert inputs["pod_count"] == 4 and inputs["enable_rdma"] is True and inputs["resource_id"] == "quotaabc123"
    assert all(isinstance(v, (str, int, float, bool, dict)) for v in inputs.values())
    assert set(inputs) <= set(j.PLAN_INPUT_KEYS)


def test_quota_job_needs_cpu_and_memory_per_pod():
    with pytest.raises(InputError, match="cpu_per_pod and memory_gib_per_pod"):
        j.job_inputs(_dlc(quota_rdma_plan(), cpu_per_pod=None, memory_gib_per_pod=None))


def test_pod_resources_from_the_profile_win_over_the_gpu_share():
    plan = dlc_quota_plan(profile={**PINNED, "dlc": {"image_tag": TAG, "cpu_per_pod": 90, "memory_gib_per_pod": 700}})
    body = r.build_create_job_request(plan, workspace_id="ws-123", **NET, data_sources=[])
    assert body["JobSpecs"][0]["ResourceConfig"] == {"GPU": "8", "CPU": "90", "Memory": "700Gi"}
    assert not any("pod CPU" in lab for lab in plan.labels)


def test_an_image_looked_up_at_deploy_time_is_shown_as_such():
    plan = dlc_plan(profile={"job": {"image": None}})
    assert plan.dlc.image is None and plan.dlc.image_lookup.repository == "pytorch-training"
    assert plan.dlc.image_lookup.min_cuda == "11.1"  # the A10 (Ampere, compute capability 8.6)
    inputs = j.job_inputs(plan)
    assert "image" not in inputs and inputs["image_lookup"]["labels"][0] == "system.official=true"
    body = r.preview_request(plan)
    assert body["JobSpecs"][0]["Image"].startswith("(resolved at deploy time: newest official PAI pytorch-training")
    with pytest.raises(ValueError, match="image is not resolved yet"):
        r.build_request_model({**inputs, "workspace_id": "ws-1"})


def test_public_job_needs_an_ecs_spec():
    with pytest.raises(InputError, match="neither an ECS spec"):
        j.job_inputs(_dlc(dlc_plan(), ecs_spec=None))


def test_not_a_dlc_plan_is_rejected():
    with pytest.raises(ValueError, match="target"):
        j.job_inputs(dlc_plan(target="ecs", dlc=None))


def test_default_image_rule_and_no_invented_tag():
    """The repository rule and the refusal of an untagged official image (a hand edit: the resolver
    looks the image up instead of leaving it untagged)."""
    assert j.default_image("cn-wulanchabu", "2.1-gpu-py310") == \
        "dsw-registry-vpc.cn-wulanchabu.cr.aliyuncs.com/pai/pytorch-training:2.1-gpu-py310"
    with pytest.raises(InputError, match="dlc.image_tag") as err:
        j.default_image(REGION, None)
    assert "never invents a tag" in err.value.hint
    untagged = "dsw-registry-vpc.cn-shenzhen.cr.aliyuncs.com/pai/pytorch-training"
    with pytest.raises(InputError, match="has no tag"):
        j.job_inputs(_dlc(dlc_plan(), image=untagged))


def test_memory_quantity_and_per_minute_rounding():
    assert j.memory_quantity(960) == "960Gi"
    assert j.memory_quantity(7.5) == "7680Mi"
    assert j.spot_price_limit_per_minute(60) == 1.0
    assert j.spot_price_limit_per_minute(0.06) == 0.001
    with pytest.raises(InputError):
        j.spot_price_limit_per_minute(0.001)


def test_redacted_request_hides_secrets_from_the_plan_output():
    plan = _dlc(dlc_plan(job=JobPlan(command="python train.py", method="lora", precision="bf16",
                                     env={"HF_TOKEN": "hf_abcdef", "NOTE": "key LTAI5tAbCdEfGhIjKlMnOp here"})),
                image=IMAGE)
    body = r.redacted_request(plan, workspace_id="ws-1", **NET, data_sources=[])
    assert body["Envs"]["HF_TOKEN"] == "***redacted***"
    assert "LTAI5t" not in json.dumps(body)
    assert body["Envs"]["NOTE"] == "key ***redacted*** here"
    # the unredacted body still carries them (it is what the API needs)
    assert r.build_create_job_request(plan, workspace_id="ws-1", **NET, data_sources=[])["Envs"]["HF_TOKEN"] == "hf_abcdef"


def test_preview_request_uses_placeholders_for_deploy_time_ids():
    plan = dlc_plan()
    body = r.preview_request(plan, stack="prod")
    assert body["WorkspaceId"] == j.UNKNOWN
    assert body["UserVpc"]["VpcId"] == j.UNKNOWN
    assert body["DataSources"] == [
        {"DataSourceId": f"{j.UNKNOWN}: dataset qwen-7b-dlc-prod-checkpoints",
         "MountPath": plan.storage.checkpoint_path, "MountAccess": "RW"},
        {"DataSourceId": f"{j.UNKNOWN}: dataset qwen-7b-dlc-prod-dataset",  # storage.dataset_uri of the sample
         "MountPath": j.DATASET_MOUNT_PATH, "MountAccess": "RO"}]
    pinned = r.preview_request(_dlc(dlc_plan(), workspace_id="ws-777"))
    assert pinned["WorkspaceId"] == "ws-777"


@pytest.mark.parametrize("uri, expected", [
    ("oss://my-data/corpus", ("OSS", "oss://my-data.oss-cn-shenzhen-internal.aliyuncs.com/corpus/")),
    ("oss://my-data.oss-cn-beijing-internal.aliyuncs.com/c/", ("OSS", "oss://my-data.oss-cn-beijing-internal.aliyuncs.com/c/")),
    ("cpfs://cpfs-0123abcd/datasets", ("NAS", "nas://cpfs-0123abcd.cn-shenzhen/datasets/")),
    ("nas://0a1b2c.cn-shenzhen/x", ("NAS", "nas://0a1b2c.cn-shenzhen/x/")),
    ("nas://0a1b2c", ("NAS", "nas://0a1b2c.cn-shenzhen/")),
])
def test_dataset_uri_in_pai_form(uri, expected):
    assert j.dataset_uri(uri, REGION) == expected


def _storage(plan, **update):
    return plan.model_copy(update={"storage": plan.storage.model_copy(update=update)})


def test_planned_datasets_checkpoint_bucket_and_read_only_dataset():
    plan = _storage(dlc_plan(), dataset_uri="oss://corpus/tokens")
    specs = j.planned_datasets(plan, stack="dev")
    ckpt, data = specs
    path = plan.storage.checkpoint_path
    assert (ckpt.role, ckpt.data_source_type, ckpt.mount_access, ckpt.mount_path) == ("checkpoints", "OSS", "RW", path)
    assert ckpt.uri == f"oss://{plan.storage.oss.bucket}.oss-cn-shenzhen-internal.aliyuncs.com/checkpoints/"
    assert json.loads(ckpt.options) == {"mountPath": path}
    assert (data.role, data.mount_access, data.mount_path) == ("dataset", "RO", j.DATASET_MOUNT_PATH)


def test_planned_datasets_checkpoints_on_existing_cpfs():
    plan = _storage(dlc_plan(), checkpoint="cpfs", oss=None, dataset_uri="cpfs://cpfs-0123abcd/train",
                    checkpoint_path="/mnt/dataset/checkpoints")
    (spec,) = j.planned_datasets(plan, stack="dev")
    assert spec.data_source_type == "NAS" and spec.mount_access == "RW"
    with pytest.raises(InputError, match="must be under /mnt/dataset"):
        j.planned_datasets(_storage(plan, checkpoint_path="/mnt/cpfs/checkpoints"), stack="dev")
    with pytest.raises(InputError, match="cannot mount a CPFS that trainstack creates"):
        j.planned_datasets(_storage(plan, dataset_uri=None), stack="dev")
    with pytest.raises(InputError, match="no ESSD"):
        j.planned_datasets(_storage(dlc_plan(), checkpoint="essd"), stack="dev")


def test_workspace_name_fits_pai_rules():
    name = j.workspace_name("9-very-long-profile-name-for-dlc", "prod")
    assert 3 <= len(name) <= 23 and name[0].isalpha()
    assert all(c.isalnum() or c == "_" for c in name)
    assert name != j.workspace_name("9-very-long-profile-name-for-dlc", "dev")
    assert name == j.workspace_name("9-very-long-profile-name-for-dlc", "prod")


def test_validate_inputs_names_each_bad_field():
    bad = {"kind": "other", "region": "", "image": IMAGE, "command": "x", "job_type": "PyTorchJob",
           "pod_count": 0, "spot": True}
    fields = [p for p, _ in j.validate_inputs(bad)]
    assert fields == ["kind", "region", "ecs_spec", "pod_count", "spot_price_limit"]
    with pytest.raises(ValueError, match="workspace_id is required"):
        r.build_request_model({**j.job_inputs(dlc_plan())})
