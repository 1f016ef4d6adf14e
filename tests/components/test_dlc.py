"""PAI-DLC job: the provider against an injected fake SDK client, and DlcTraining under Pulumi mocks."""

from __future__ import annotations


import base64
import json

import dill
import pytest
import requests
from alibabacloud_pai_dlc20201203 import models as m
from alibabacloud_tea_openapi.exceptions import ClientException, ServerException, ThrottlingException
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime import rpc
from Tea.exceptions import UnretryableException

import components.dlc as dlc
from components.dlc import DlcJobProvider, DlcTraining
from trainstack.cloud.dlc import DlcApiError
from plan_factory import dlc_plan, dlc_quota_plan
from trainstack import dlc_job as j
from trainstack.cloud import dlc_request as r
from trainstack.errors import EXIT_CLOUD_API, CloudApiError, InputError

TAG = "2.1-gpu-py310-cu121-ubuntu22.04"
IMAGE = f"dsw-registry-vpc.cn-shenzhen.cr.aliyuncs.com/pai/pytorch-training:{TAG}"
NET = dict(vpc_id="vpc-wz9abc", vswitch_id="vsw-wz9abc", security_group_id="sg-wz9abc")
SOURCES = [{"data_source_id": "d-ckpt", "mount_path": "/mnt/data/checkpoints", "mount_access": "RW"}]
JOB = "dlc1a2b3c4d5e"
DYNAMIC = "pulumi-python:dynamic:Resource"
PINNED = {"job": {"image": None}, "dlc": {"image_tag": TAG}}


# ---------------------------------------------------------------------------------------------
# fake SDK client (same method signatures as alibabacloud_pai_dlc20201203.client.Client)


def not_found():
    return ClientException(status_code=404, code="JobNotFound", request_id="RID-404",
                           message=f"code: 404, Job {JOB} not found request id: RID-404")


def throttled():
    return ThrottlingException(status_code=429, code="Throttling.User", request_id="RID-429",
                               message="code: 429, Request was denied due to user flow control. request id: RID-429")


class FakeClient:
    """Records every call. ``statuses`` are what successive GetJob calls report (the last one
    repeats); ``fail`` maps a method to exceptions raised, in order, before it succeeds."""

    def __init__(self, statuses=("Queuing",), fail=None, gone=False):
        self.calls: list[tuple] = []
        self.statuses = list(statuses)
        self.fail = {k: list(v) for k, v in (fail or {}).items()}
        self.gone = gone

    def _maybe_fail(self, method):
        queue = self.fail.get(method)
        if queue:
            raise queue.pop(0)

    def create_job(self, request: m.CreateJobRequest) -> m.CreateJobResponse:
        self.calls.append(("create_job", request))
        self._maybe_fail("create_job")
        return m.CreateJobResponse(status_code=200, body=m.CreateJobResponseBody(job_id=JOB, request_id="RID-1"))

    def get_job(self, job_id: str, request: m.GetJobRequest) -> m.GetJobResponse:
        self.calls.append(("get_job", job_id))
        self._maybe_fail("get_job")
        if self.gone:
            raise not_found()
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        body = m.GetJobResponseBody(job_id=job_id, status=status)
        if status == "Failed":
            body.reason_code, body.reason_message = "JobFailed", "exit code 1 in worker-0"
        return m.GetJobResponse(status_code=200, body=body)

    def stop_job(self, job_id: str) -> m.StopJobResponse:
        self.calls.append(("stop_job", job_id))
        self._maybe_fail("stop_job")
        return m.StopJobResponse(status_code=200)

    def delete_job(self, job_id: str) -> m.DeleteJobResponse:
        self.calls.append(("delete_job", job_id))
        self._maybe_fail("delete_job")
        self.gone = True
        return m.DeleteJobResponse(status_code=200)

    def methods(self):
        return [c[0] for c in self.calls]


class FakeWorkspace:
    """AIWorkspace ListImages over a table of images (``ImageUri``, ``GmtCreateTime``)."""

    def __init__(self, images):
        self.images = list(images)
        self.requests: list = []

    def list_images(self, request):
        from alibabacloud_aiworkspace20210204 import models as ws

        self.requests.append(request)
        return ws.ListImagesResponse(status_code=200, body=ws.ListImagesResponseBody().from_map(
            {"Images": self.images, "TotalCount": len(self.images), "RequestId": "RID-img"}))


def official(tag, created="2025-01-01T00:00:00Z", repo="pytorch-training"):
    return {"ImageUri": f"dsw-registry-vpc.cn-shenzhen.cr.aliyuncs.com/pai/{repo}:{tag}", "Name": repo,
            "GmtCreateTime": created}


IMAGES = [official("2.1-gpu-py310-cu121-ubuntu22.04", "2024-01-01T00:00:00Z"),
          official("2.3-gpu-py311-cu121-ubuntu22.04", "2024-08-01T00:00:00Z"),
          official("2.3-cpu-py311-ubuntu22.04", "2024-09-01T00:00:00Z"),
          official("2.3-accl-gpu-py311-cu121-ubuntu22.04", "2024-10-01T00:00:00Z")]


class FakeQuota:
    """PAI Studio GetQuota of one quota: its kind, node specs and allocatable resources."""

    def __init__(self, resource_type="ECS", nodes=("ecs.ebmgn7ex.32xlarge",), gpu="32", cpu="512", memory="4096Gi",
                 fail=None):
        self.body = {"QuotaId": "quotaabc123", "ResourceType": resource_type,
                     "Min": {"NodeSpecs": [{"Type": n, "Count": 4} for n in nodes]},
                     "QuotaDetails": {"AllocatableQuota": {"GPU": gpu, "CPU": cpu, "Memory": memory}}}
        self.calls: list[str] = []
        self.fail = list(fail or [])

    def get_quota(self, quota_id, request):
        from alibabacloud_paistudio20220112 import models as ps

        self.calls.append(quota_id)
        if self.fail:
            raise self.fail.pop(0)
        return ps.GetQuotaResponse(status_code=200, body=ps.GetQuotaResponseBody().from_map(self.body))


def provider(client, workspace=None, quota=None, **kw):
    sleeps: list[float] = []
    prov = DlcJobProvider(lambda region: client, sleep=sleeps.append, rand=lambda: 0.5,
                          workspace_client_factory=lambda region: workspace or FakeWorkspace(IMAGES),
                          quota_client_factory=lambda region: quota or FakeQuota(), **kw)
    return prov, sleeps


def _dlc(plan, **update):
    """A hand edit of the DLC block: only for reactions to plans the resolver does not make."""
    return plan.model_copy(update={"dlc": plan.dlc.model_copy(update=update)})


def single_gpu_plan():
    """The resolver's plan of the sample: one public-resource A10 pod, the official image pinned by tag."""
    return dlc_plan(profile={**PINNED, "job": {"image": None, "command": "python train.py"}})


def quota_rdma_plan():
    """The resolver's plan of a 32-GPU job on a quota of ebmgn7ex nodes: 4 pods x 8 GPUs, eRDMA."""
    return dlc_quota_plan(profile=PINNED)


def spot_plan():
    """The resolver's spot plan (resources.spot: require)."""
    return dlc_plan(profile={**PINNED, "resources": {"spot": "require"}})


def lookup_plan():
    """The resolver's plan with no image pinned: PAI's official image is looked up at deploy time."""
    return dlc_plan(profile={"job": {"image": None}})


def engine_props(plan, **deploy):
    """The props a provider receives from the engine: numbers as floats, plus the provider blob."""
    props = {**j.job_inputs(plan), "workspace_id": "ws-123", **NET, "data_sources": SOURCES, **deploy}
    props = {k: (float(v) if isinstance(v, int) and not isinstance(v, bool) else v) for k, v in props.items()}
    props["__provider"] = "serialized"
    return props


# ---------------------------------------------------------------------------------------------
# create


@pytest.mark.parametrize("make_plan", [single_gpu_plan, quota_rdma_plan, spot_plan],
                         ids=["single-gpu", "quota-rdma", "spot"])
def test_create_sends_exactly_the_planned_request(make_plan):
    plan = make_plan()
    client = FakeClient(statuses=["Queuing"])
    prov, sleeps = provider(client)
    result = prov.create(engine_props(plan))
    assert client.methods() == ["create_job", "get_job"]
    sent = client.calls[0][1]
    assert isinstance(sent, m.CreateJobRequest)
    assert sent.to_map() == r.build_create_job_request(plan, workspace_id="ws-123", **NET, data_sources=SOURCES)
    assert isinstance(sent.job_specs[0].pod_count, int)  # engine floats -> API integers
    assert result.id == JOB
    assert result.outs["job_id"] == JOB and result.outs["status"] == "Queuing" and result.outs["reason"] == ""
    assert result.outs["kind"] == "pai-dlc-job" and "__provider" not in result.outs
    assert sleeps == []


def test_create_single_gpu_request_fields():
    client = FakeClient()
    prov, _ = provider(client)
    prov.create(engine_props(single_gpu_plan()))
    body = client.calls[0][1].to_map()
    assert body["JobSpecs"][0]["EcsSpec"] == "ecs.gn7i-c8g1.2xlarge" and body["JobSpecs"][0]["PodCount"] == 1
    assert body["UserVpc"] == {"VpcId": "vpc-wz9abc", "SwitchId": "vsw-wz9abc", "SecurityGroupId": "sg-wz9abc",
                               "ExtendedCIDRs": ["10.0.0.0/16"]}
    assert body["DataSources"] == [{"DataSourceId": "d-ckpt", "MountPath": "/mnt/data/checkpoints",
                                    "MountAccess": "RW"}]


def test_create_quota_rdma_and_spot_fields():
    client = FakeClient()
    provider(client)[0].create(engine_props(quota_rdma_plan()))
    body = client.calls[0][1].to_map()
    assert body["ResourceId"] == "quotaabc123" and body["Settings"] == {"EnableRDMA": True}
    assert body["JobSpecs"][0]["ResourceConfig"] == {"GPU": "8", "CPU": "128", "Memory": "1024Gi"}
    assert body["Envs"]["NCCL_IB_HCA"] == "erdma" and body["JobSpecs"][0]["PodCount"] == 4
    client = FakeClient()
    provider(client)[0].create(engine_props(spot_plan()))
    assert client.calls[0][1].to_map()["JobSpecs"][0]["SpotSpec"] == {
        "SpotStrategy": "SpotWithPriceLimit",
        "SpotPriceLimit": j.spot_price_limit_per_minute(spot_plan().dlc.spot_price_limit)}


def test_create_survives_a_failing_first_status_read():
    client = FakeClient(fail={"get_job": [ClientException(status_code=403, code="Forbidden.RAM", message="no")]})
    result = provider(client)[0].create(engine_props(single_gpu_plan()))
    assert result.id == JOB and result.outs["status"] == "Creating"


def test_throttling_is_retried_with_backoff_then_succeeds():
    client = FakeClient(fail={"create_job": [throttled(), throttled()]})
    prov, sleeps = provider(client)
    result = prov.create(engine_props(single_gpu_plan()))
    assert client.methods().count("create_job") == 3 and result.id == JOB
    # exponential (1 s, 2 s) with half jittered (rand 0.5): 0.75 s, 1.5 s; no real sleep happened
    assert sleeps == [0.75, 1.5]


def test_retry_after_header_is_honoured_and_attempts_are_bounded():
    exc = throttled()
    exc.retry_after = 4000  # ms, from x-acs-retry-after
    client = FakeClient(fail={"get_job": [exc] * 10})
    prov, sleeps = provider(client, max_attempts=4)
    with pytest.raises(DlcApiError) as err:
        prov.read(JOB, engine_props(single_gpu_plan()))
    assert client.methods() == ["get_job"] * 4
    assert sleeps == [4.0, 4.0, 4.0]
    assert "Throttling.User" in str(err.value) and "after 4 attempts" in str(err.value)
    assert "wait a minute" in str(err.value)


def test_transient_errors_are_retried_for_reads():
    timeout = UnretryableException(None, requests.exceptions.ReadTimeout("read timed out"))
    client = FakeClient(statuses=["Running"], fail={"get_job": [
        ServerException(status_code=503, code="ServiceUnavailable", message="code: 503, busy request id: x"),
        ServerException(status_code=500, code="InternalError", message="code: 500, oops request id: y"),
        timeout]})
    prov, sleeps = provider(client)
    assert prov.read(JOB, engine_props(single_gpu_plan())).outs["status"] == "Running"
    assert len(sleeps) == 3


def test_create_is_not_retried_when_the_api_may_have_run_it():
    client = FakeClient(fail={"create_job": [ServerException(status_code=500, code="InternalError",
                                                             message="code: 500, oops request id: RID-500",
                                                             request_id="RID-500")]})
    prov, sleeps = provider(client)
    with pytest.raises(DlcApiError) as err:
        prov.create(engine_props(single_gpu_plan()))
    assert client.methods() == ["create_job"] and sleeps == []
    assert "InternalError" in str(err.value) and "RID-500" in str(err.value)
    assert "duplicate" in err.value.fix


def test_permanent_error_names_code_message_request_id_and_the_fix():
    bad = ClientException(status_code=400, code="InvalidParameter", request_id="7F3A-11",
                          message="code: 400, JobSpecs[0].EcsSpec ecs.bad.large is not supported request id: 7F3A-11")
    client = FakeClient(fail={"create_job": [bad]})
    prov, sleeps = provider(client)
    with pytest.raises(DlcApiError) as err:
        prov.create(engine_props(single_gpu_plan()))
    text = str(err.value)
    assert client.methods() == ["create_job"] and sleeps == []  # permanent: no retry
    assert text.startswith("PAI-DLC CreateJob failed: InvalidParameter: JobSpecs[0].EcsSpec ecs.bad.large is "
                           "not supported (HTTP 400, request id 7F3A-11)")
    assert "\nWhat to fix: " in text and "ListEcsSpecs" in text
    assert err.value.exit_code == EXIT_CLOUD_API
    assert (err.value.code, err.value.request_id) == ("InvalidParameter", "7F3A-11")


@pytest.mark.parametrize("exc, fix", [
    (ClientException(status_code=403, code="Forbidden.RAM", message="code: 403, not authorized request id: a"),
     "AliyunPAIDLCFullAccess"),
    (ClientException(status_code=400, code="EntityNotExist.Workspace", message="code: 400, workspace 1 request id: b"),
     "dlc.workspace_id"),
    (ClientException(status_code=400, code="QuotaExceeded", message="code: 400, gpu limit request id: c"),
     "2 GPUs and 8 vCPUs"),
    (ClientException(status_code=400, code="InsufficientBalance", message="code: 400, balance request id: d"),
     "top up"),
    (UnretryableException(None, type("CredentialException", (Exception,), {})("no credentials in chain")),
     "ALIBABA_CLOUD_ACCESS_KEY_ID"),
])
def test_common_permanent_errors_map_to_a_fix(exc, fix):
    client = FakeClient(fail={"create_job": [exc]})
    with pytest.raises(DlcApiError) as err:
        provider(client)[0].create(engine_props(single_gpu_plan()))
    assert fix in str(err.value)
    assert client.methods() == ["create_job"]


# ---------------------------------------------------------------------------------------------
# read / delete


def test_read_returns_status_and_reason():
    client = FakeClient(statuses=["Failed"])
    result = provider(client)[0].read(JOB, engine_props(single_gpu_plan()))
    assert result.id == JOB
    assert result.outs["status"] == "Failed" and result.outs["reason"] == "JobFailed: exit code 1 in worker-0"
    assert result.outs["ecs_spec"] == "ecs.gn7i-c8g1.2xlarge"


def test_read_of_a_deleted_job_reports_it_gone():
    client = FakeClient(gone=True)
    result = provider(client)[0].read(JOB, engine_props(single_gpu_plan()))
    assert result.id == "" and result.outs == {}


def test_delete_running_job_stops_waits_then_deletes():
    client = FakeClient(statuses=["Running", "Stopping", "Stopped"])
    prov, sleeps = provider(client, poll_interval=5)
    prov.delete(JOB, engine_props(single_gpu_plan()))
    assert client.methods() == ["get_job", "stop_job", "get_job", "get_job", "delete_job"]
    assert sleeps == [5]


def test_delete_finished_job_skips_stop():
    for status in ("Succeeded", "Failed", "Stopped"):
        client = FakeClient(statuses=[status])
        provider(client)[0].delete(JOB, engine_props(single_gpu_plan()))
        assert client.methods() == ["get_job", "delete_job"]


def test_delete_of_an_already_deleted_job_is_success():
    client = FakeClient(gone=True)
    provider(client)[0].delete(JOB, engine_props(single_gpu_plan()))
    assert client.methods() == ["get_job"]
    # gone between the status read and DeleteJob
    client = FakeClient(statuses=["Succeeded"], fail={"delete_job": [not_found()]})
    provider(client)[0].delete(JOB, engine_props(single_gpu_plan()))
    assert client.methods() == ["get_job", "delete_job"]


def test_delete_tolerates_a_job_finishing_while_being_stopped():
    refused = ClientException(status_code=400, code="InvalidJobStatus", message="code: 400, job finished request id: z")
    client = FakeClient(statuses=["Running", "Succeeded"], fail={"stop_job": [refused]})
    provider(client)[0].delete(JOB, engine_props(single_gpu_plan()))
    assert client.methods() == ["get_job", "stop_job", "get_job", "get_job", "delete_job"]


def test_delete_gives_up_waiting_with_a_clear_error():
    client = FakeClient(statuses=["Stopping"])
    prov, sleeps = provider(client, poll_interval=10, stop_timeout=30)
    with pytest.raises(DlcApiError, match="re-run `pulumi destroy`"):
        prov.delete(JOB, engine_props(single_gpu_plan()))
    assert "stop_job" not in client.methods() and "delete_job" not in client.methods()
    assert sleeps == [10, 10, 10]


# ---------------------------------------------------------------------------------------------
# diff / check / plumbing


def test_diff_replaces_on_any_input_change_and_ignores_outputs():
    prov = DlcJobProvider()
    olds = {**engine_props(single_gpu_plan()), "job_id": JOB, "status": "Running", "reason": ""}
    news = {**j.job_inputs(single_gpu_plan()), "workspace_id": "ws-123", **NET, "data_sources": SOURCES,
            "__provider": "other"}
    same = prov.diff(JOB, olds, news)
    assert same.changes is False and same.replaces == []
    changed = prov.diff(JOB, olds, {**news, "image": IMAGE + "-new", "pod_count": 2})
    assert changed.changes is True and changed.replaces == ["image", "pod_count"]
    assert changed.delete_before_replace is True
    unknown = prov.diff(JOB, olds, {**news, "workspace_id": rpc.UNKNOWN})
    assert unknown.replaces == ["workspace_id"]


def test_check_reports_bad_plain_inputs_and_skips_unknowns():
    prov = DlcJobProvider()
    good = engine_props(single_gpu_plan(), workspace_id=rpc.UNKNOWN)
    assert prov.check({}, good).failures == []
    failures = prov.check({}, {**good, "pod_count": 0.0, "ecs_spec": None}).failures
    assert [f.property for f in failures] == ["ecs_spec", "pod_count"]


def test_module_client_factory_is_used_when_none_is_injected(monkeypatch):
    client = FakeClient(statuses=["Running"])
    regions = []
    monkeypatch.setattr(dlc, "client_factory", lambda region: regions.append(region) or client)
    DlcJobProvider(sleep=lambda s: None).read(JOB, engine_props(single_gpu_plan()))
    assert regions == ["cn-shenzhen"] and client.methods() == ["get_job"]


def test_default_client_is_the_official_sdk_on_the_regional_endpoint():
    from alibabacloud_pai_dlc20201203.client import Client

    client = dlc.default_client("cn-shenzhen")  # no network I/O: credentials resolve on first call
    assert isinstance(client, Client)
    assert client._endpoint == "pai-dlc.cn-shenzhen.aliyuncs.com"


def test_provider_pickles_small_and_round_trips():
    blob = serialize_provider(DlcJobProvider())
    assert len(blob) < 4000
    restored = dill.loads(base64.b64decode(blob))
    assert isinstance(restored, DlcJobProvider) and restored.client_factory is None


# ---------------------------------------------------------------------------------------------
# DlcTraining under Pulumi mocks (the provider is not called: the mock monitor registers it)


def test_dlc_training_creates_workspace_datasets_and_job(engine):
    plan = dlc_plan(profile={"storage": {"dataset_uri": None}, "resources": {"gpus": 2},
                             "dlc": {"public_limits_raised": True}})
    comp = engine.run(lambda: DlcTraining("qwen", plan, "vpc-1", "vsw-1", "sg-1"))
    ws = engine.one("pai/workspaceWorkspace:WorkspaceWorkspace")
    assert ws.inputs["workspaceName"] == j.workspace_name("qwen-7b-dlc", "test")
    assert ws.inputs["envTypes"] == ["prod"]
    ds = engine.one("pai/workspaceDataset:WorkspaceDataset")
    assert ds.inputs["dataSourceType"] == "OSS" and ds.inputs["property"] == "DIRECTORY"
    assert ds.inputs["uri"] == f"oss://{plan.storage.oss.bucket}.oss-cn-shenzhen-internal.aliyuncs.com/checkpoints/"
    assert ds.inputs["options"] == json.dumps({"mountPath": plan.storage.checkpoint_path})
    assert ds.inputs["workspaceId"] == f"workspaceworkspace-{ws.name}"
    job = engine.one(DYNAMIC)
    assert job.inputs["kind"] == "pai-dlc-job"
    assert job.inputs["ecs_spec"] == plan.dlc.ecs_spec
    assert job.inputs["pod_count"] == plan.dlc.pod_count and job.inputs["spot"] is False
    assert job.inputs["enable_rdma"] is (plan.dlc.pod_count > 1)
    assert job.inputs["workspace_id"] == f"workspaceworkspace-{ws.name}"
    assert job.inputs["data_sources"] == [{"data_source_id": f"workspacedataset-{ds.name}",
                                           "mount_path": plan.storage.checkpoint_path, "mount_access": "RW"}]
    assert (job.inputs["vpc_id"], job.inputs["vswitch_id"], job.inputs["security_group_id"]) == \
        ("vpc-1", "vsw-1", "sg-1")
    assert "__provider" in job.inputs
    parent = engine.one("trainstack:index:DlcTraining")
    assert {ws.parent, ds.parent, job.parent} == {parent.urn}
    assert ds.urn in job.dependencies
    assert not engine.of_type("ecs/instance:Instance")
    assert engine.value(comp.workspace_id) == f"workspaceworkspace-{ws.name}"


def test_dlc_training_with_pinned_workspace_and_dataset_uri(engine):
    plan = _dlc(dlc_plan(), workspace_id="ws-777")
    plan = plan.model_copy(update={"storage": plan.storage.model_copy(update={"dataset_uri": "cpfs://cpfs-01ab/d"})})
    engine.run(lambda: DlcTraining("qwen", plan, "vpc-1", "vsw-1", "sg-1"))
    assert not engine.of_type("pai/workspaceWorkspace:WorkspaceWorkspace")
    datasets = {d.inputs["datasetName"]: d.inputs for d in engine.of_type("pai/workspaceDataset:WorkspaceDataset")}
    assert datasets["qwen-7b-dlc-test-dataset"]["uri"] == "nas://cpfs-01ab.cn-shenzhen/d/"
    assert datasets["qwen-7b-dlc-test-dataset"]["dataSourceType"] == "NAS"
    assert all(d["workspaceId"] == "ws-777" for d in datasets.values())
    job = engine.one(DYNAMIC)
    assert job.inputs["workspace_id"] == "ws-777"
    assert [s["mount_access"] for s in job.inputs["data_sources"]] == ["RW", "RO"]


def test_quota_job_without_workspace_fails_before_creating_anything(engine):
    # the rule book refuses this profile (plan_factory cannot make it): the stack must refuse the plan too
    with pytest.raises(InputError, match="needs dlc.workspace_id"):
        dlc_quota_plan(profile={"dlc": {"workspace_id": None}})
    plan = _dlc(quota_rdma_plan(), workspace_id=None)
    with pytest.raises(InputError) as err:
        engine.declare(plan)  # the stack checks the plan against the rule book first
    assert any("needs dlc.workspace_id" in p.message and p.path == "dlc.resource_id" for p in err.value.problems)
    assert not engine.of_type("pai/workspaceWorkspace:WorkspaceWorkspace")


def test_dlc_stack_has_workspace_datasets_job_and_no_ecs_nodes(engine):
    plan = dlc_plan()
    engine.declare(plan)
    assert len(engine.of_type("pai/workspaceWorkspace:WorkspaceWorkspace")) == 1
    assert len(engine.of_type("pai/workspaceDataset:WorkspaceDataset")) == 2  # checkpoints + storage.dataset_uri
    job = engine.one(DYNAMIC)
    assert job.inputs["kind"] == "pai-dlc-job" and job.inputs["pod_count"] == plan.dlc.pod_count
    vpc = engine.one("vpc/network:Network")
    assert job.inputs["vpc_id"] == f"network-{vpc.name}"
    assert job.inputs["security_group_id"] == f"securitygroup-{engine.one('ecs/securityGroup:SecurityGroup').name}"
    assert not engine.of_type("ecs/instance:Instance")


def test_recorded_job_inputs_rebuild_the_exact_request(engine):
    """What the offline plan shows (rebuilt from the recorded inputs) is what the provider sends."""
    plan = quota_rdma_plan()
    engine.run(lambda: DlcTraining("big", plan, "vpc-1", "vsw-1", "sg-1"))
    job = engine.one(DYNAMIC)
    recorded = {k: v for k, v in job.inputs.items() if k != "__provider"}
    by_name = {d.name: d for d in engine.of_type("pai/workspaceDataset:WorkspaceDataset")}
    expected = r.build_create_job_request(
        plan, workspace_id="ws-123", vpc_id="vpc-1", vswitch_id="vsw-1", security_group_id="sg-1",
        data_sources=[spec.data_source(f"workspacedataset-big-{spec.role}")
                      for spec in j.planned_datasets(plan, "test") if f"big-{spec.role}" in by_name])
    assert r.build_request_model(recorded).to_map() == expected
    client = FakeClient()
    provider(client)[0].create({**recorded, "__provider": "x"})
    assert client.calls[0][1].to_map() == expected


# ---------------------------------------------------------------------------------------------
# the official image, looked up at deploy time and kept in the state


def test_create_looks_up_the_newest_official_gpu_image_and_keeps_it():
    plan = lookup_plan()
    client, workspace = FakeClient(), FakeWorkspace(IMAGES)
    prov, _ = provider(client, workspace=workspace)
    result = prov.create(engine_props(plan))
    # 2.3 GPU on CUDA 12.1: newer than 2.1; the CPU build and the accl variant are never the default
    chosen = "dsw-registry-vpc.cn-shenzhen.cr.aliyuncs.com/pai/pytorch-training:2.3-gpu-py311-cu121-ubuntu22.04"
    assert client.calls[0][1].job_specs[0].image == chosen
    assert result.outs["image_resolved"] == chosen and "image" not in result.outs
    (req,) = workspace.requests
    assert req.labels == "system.official=true,system.supported.dlc=true,system.chipType=GPU"
    assert (req.name, req.sort_by, req.order) == ("pytorch", "GmtCreateTime", "DESC")


def test_an_image_below_the_gpus_cuda_is_never_chosen():
    hopper = dlc_plan(profile={"job": {"image": None}, "resources": {"gpu_models": ["H20"], "gpus": 1},
                               "dlc": {"public_limits_raised": True}})
    assert hopper.dlc.image_lookup.min_cuda == "11.8"
    old_cuda = [official("2.0-gpu-py310-cu117-ubuntu20.04"), official("1.13-gpu-py39-cu116-ubuntu20.04")]
    client = FakeClient()
    with pytest.raises(CloudApiError, match="no official pytorch-training GPU image with CUDA >= 11.8") as err:
        provider(client, workspace=FakeWorkspace(old_cuda))[0].create(engine_props(hopper))
    assert "dlc.image_tag" in err.value.hint and client.calls == []  # nothing submitted


def test_a_newer_official_image_never_replaces_a_submitted_job():
    plan = lookup_plan()
    prov, _ = provider(FakeClient())
    created = prov.create(engine_props(plan))
    olds = {**created.outs, "__provider": "serialized"}
    # a month later ListImages lists a newer image: the inputs are the same, so nothing changes
    news = {**j.job_inputs(plan), "workspace_id": "ws-123", **NET, "data_sources": SOURCES, "__provider": "x"}
    assert DlcJobProvider().diff(JOB, olds, news).changes is False
    # pinning a tag is a real change: the job is replaced with the pinned image
    pinned = {**news, "image": IMAGE}
    pinned.pop("image_lookup")
    assert DlcJobProvider().diff(JOB, olds, pinned).replaces == ["image", "image_lookup"]


def test_read_reports_the_image_the_job_runs():
    client = FakeClient(statuses=["Running"])
    props = {**engine_props(lookup_plan()), "image_resolved": "old-image"}
    assert provider(client)[0].read(JOB, props).outs["image_resolved"] == "old-image"


def test_informational_quota_inputs_never_replace_the_job():
    plan = quota_rdma_plan()
    olds = {**engine_props(plan), "job_id": JOB}
    olds.pop("quota_spec"), olds.pop("quota_kind")  # a state written before they existed
    news = {**j.job_inputs(plan), "workspace_id": "ws-123", **NET, "data_sources": SOURCES}
    assert DlcJobProvider().diff(JOB, olds, news).changes is False


# ---------------------------------------------------------------------------------------------
# the quota, read before the job is submitted


def test_a_matching_quota_is_read_then_the_job_submitted():
    client, quota = FakeClient(), FakeQuota()
    provider(client, quota=quota)[0].create(engine_props(quota_rdma_plan()))
    assert quota.calls == ["quotaabc123"] and client.methods() == ["create_job", "get_job"]


@pytest.mark.parametrize("quota, words", [
    (FakeQuota(resource_type="Lingjun", nodes=("ml.gu7xf.c96m1600.8-gu108",)), "is a Lingjun quota"),
    (FakeQuota(nodes=("ecs.gn7e-c16g1.32xlarge",)), "has nodes ecs.gn7e-c16g1.32xlarge; the job was sized for "
                                                    "ecs.ebmgn7ex.32xlarge"),
    (FakeQuota(gpu="16"), "needs 32 GPUs (4 pod(s) x 8); quota quotaabc123 can allocate 16"),
    (FakeQuota(memory="2048Gi"), "needs 4096 GiB of memory"),
])
def test_a_quota_that_cannot_run_the_pods_stops_the_deploy_with_the_reason(quota, words):
    client = FakeClient()
    with pytest.raises(CloudApiError) as err:
        provider(client, quota=quota)[0].create(engine_props(quota_rdma_plan()))
    assert words in err.value.message and "nothing was submitted" in err.value.message
    assert client.calls == []


def test_a_quota_read_that_fails_is_exit_5_with_the_fix():
    denied = ClientException(status_code=403, code="Forbidden.RAM", message="code: 403, no request id: q")
    client = FakeClient()
    with pytest.raises(DlcApiError) as err:
        provider(client, quota=FakeQuota(fail=[denied]))[0].create(engine_props(quota_rdma_plan()))
    assert err.value.operation == "GetQuota" and err.value.exit_code == EXIT_CLOUD_API and client.calls == []


def test_a_provider_pickled_before_the_lookups_existed_still_works(monkeypatch):
    """States hold the provider pickled by dill: an old one lacks the new attributes."""
    old = DlcJobProvider(sleep=lambda s: None)
    del old.__dict__["workspace_client_factory"], old.__dict__["quota_client_factory"]
    restored = dill.loads(dill.dumps(old))
    client, workspace = FakeClient(), FakeWorkspace(IMAGES)
    monkeypatch.setattr(dlc, "client_factory", lambda region: client)
    monkeypatch.setattr(dlc, "workspace_client_factory", lambda region: workspace)
    restored.create(engine_props(lookup_plan()))
    assert workspace.requests and client.methods() == ["create_job", "get_job"]
    assert type(restored).__module__ == "components.dlc" and type(restored).__name__ == "DlcJobProvider"


def test_dlc_training_sends_the_lookup_not_an_invented_image(engine):
    engine.run(lambda: DlcTraining("qwen", lookup_plan(), "vpc-1", "vsw-1", "sg-1"))
    job = engine.one(DYNAMIC)
    assert job.inputs.get("image") is None and job.inputs["image_lookup"]["repository"] == "pytorch-training"
