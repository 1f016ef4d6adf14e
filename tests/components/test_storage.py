"""Storage: checkpoints survive `pulumi destroy`, everything is encrypted and private."""

import pytest

from plan_factory import dlc_plan, multi_node_erdma_plan, single_gpu_lora_plan, spot_plan
from trainstack.errors import InputError
from trainstack.plan import DataDiskPlan

BUCKET = "oss/bucket:Bucket"
CPFS = "nas/fileSystem:FileSystem"


def _storage(plan, **update):
    return plan.model_copy(update={"storage": plan.storage.model_copy(update=update)})


def test_checkpoint_bucket_is_private_encrypted_versioned_and_kept_on_destroy(engine):
    plan = single_gpu_lora_plan()
    engine.declare(plan)
    bucket = engine.one(BUCKET)
    name = engine.result.plan.storage.oss.bucket  # <profile name>-<digest of account, project, stack, region>
    assert name.startswith("llama3-8b-lora-") and name != plan.storage.oss.bucket
    assert bucket.inputs["bucket"] == name
    assert bucket.inputs["versioning"] == {"status": "Enabled"}
    assert bucket.inputs["serverSideEncryptionRule"] == {"sseAlgorithm": "AES256"}
    assert bucket.inputs["forceDestroy"] is False
    assert "acl" not in bucket.inputs  # deprecated on Bucket; set by BucketAcl below
    assert bucket.inputs["tags"]["trainstack:role"] == "checkpoint"
    assert bucket.protect and bucket.retain_on_delete
    acl = engine.one("oss/bucketAcl:BucketAcl")
    assert acl.inputs == {"bucket": name, "acl": "private"}
    block = engine.one("oss/bucketPublicAccessBlock:BucketPublicAccessBlock")
    assert block.inputs["blockPublicAccess"] is True


def test_retain_on_destroy_false_lets_destroy_delete_the_bucket(engine):
    engine.declare(_storage(single_gpu_lora_plan(), retain_on_destroy=False))
    bucket = engine.one(BUCKET)
    assert not bucket.protect and not bucket.retain_on_delete


def test_cpfs_with_nfs_protocol_service_when_planned(engine):
    plan = multi_node_erdma_plan()
    engine.declare(plan)
    fs = engine.one(CPFS)
    assert fs.inputs["fileSystemType"] == "cpfs" and fs.inputs["protocolType"] == "cpfs"
    assert fs.inputs["storageType"] == "advance_200" and fs.inputs["capacity"] == plan.storage.cpfs.capacity_gib
    assert fs.inputs["zoneId"] == engine.result.zone
    assert fs.inputs["vpcId"] == "network-llama3-70b-full-network-vpc"
    # CPFS and its protocol service take random addresses: the services vSwitch, never the nodes'
    assert fs.inputs["vswitchId"] == "switch-llama3-70b-full-network-services-vswitch"
    svc = engine.one("nas/protocolService:ProtocolService")
    assert svc.inputs["protocolType"] == "NFS" and svc.inputs["fileSystemId"] == f"filesystem-{fs.name}"
    assert svc.inputs["vswitchId"] == fs.inputs["vswitchId"]
    # ForceNew throughput left to CPFS (a capacity change keeps the service); one per file system
    assert "protocolThroughput" not in svc.inputs and svc.delete_before_replace
    target = engine.one("nas/protocolMountTarget:ProtocolMountTarget")
    assert target.inputs["protocolServiceId"] == f"ptc-{svc.name}"
    assert target.inputs["fileSystemId"] == f"filesystem-{fs.name}"


def test_cpfs_holding_checkpoints_is_protected_and_retained(engine):
    engine.declare(multi_node_erdma_plan())
    fs = engine.one(CPFS)
    assert fs.protect and fs.retain_on_delete
    assert fs.inputs["tags"]["trainstack:role"] == "checkpoint"
    # the NFS service holds no data: destroy may remove it
    assert not engine.one("nas/protocolService:ProtocolService").protect


def test_no_cpfs_unless_planned(engine):
    engine.declare(spot_plan())
    assert engine.of_type(CPFS) == []
    assert engine.of_type("nas/protocolService:ProtocolService") == []


def test_essd_checkpoints_live_on_standalone_protected_disks_one_per_node(engine):
    plan = multi_node_erdma_plan(nodes=3, profile={"storage": {"checkpoint": "essd"}})
    disk = plan.storage.checkpoint_disk  # its own disk, apart from the dataset cache
    assert disk.holds_checkpoints and not disk.delete_with_instance and not plan.storage.data_disk.holds_checkpoints
    engine.declare(plan)
    disks = [d for d in engine.of_type("ecs/ecsDisk:EcsDisk") if d.inputs["diskName"].endswith("-checkpoints")]
    assert len(disks) == 3
    for d in disks:
        assert d.protect and d.retain_on_delete
        assert d.inputs["encrypted"] is True and d.inputs["deleteWithInstance"] is False
        assert (d.inputs["category"], d.inputs["performanceLevel"], d.inputs["size"]) == \
            ("cloud_essd", disk.performance_level, disk.size_gib)
        assert d.inputs["zoneId"] == engine.result.zone
        assert d.inputs["tags"]["trainstack:role"] == "checkpoint"
    attachments = [a for a in engine.of_type("ecs/ecsDiskAttachment:EcsDiskAttachment")
                   if a.inputs["diskId"] in {f"ecsdisk-{d.name}" for d in disks}]
    assert sorted(a.inputs["diskId"] for a in attachments) == sorted(f"ecsdisk-{d.name}" for d in disks)
    assert all(a.inputs["deleteWithInstance"] is False for a in attachments)
    # no second, instance-bound copy of the checkpoint disk
    assert all("dataDisks" not in i.inputs for i in engine.of_type("ecs/instance:Instance"))


@pytest.mark.parametrize("level,size", [("PL3", 1260), ("PL2", 460), ("PL1", 19)])
def test_essd_below_the_performance_level_minimum_is_refused(engine, level, size):
    plan = _storage(single_gpu_lora_plan(), data_disk=DataDiskPlan(performance_level=level, size_gib=size))
    with pytest.raises(InputError, match=f"ESSD {level} needs"):  # the rule book, before any resource
        engine.declare(plan)
    assert [r.type for r in engine.resources] == ["pulumi:providers:alicloud"]


def test_pl3_at_its_minimum_size_is_accepted(engine):
    engine.declare(_storage(single_gpu_lora_plan(), data_disk=DataDiskPlan(performance_level="PL3", size_gib=1261)))
    (disk,) = engine.of_type("ecs/ecsDisk:EcsDisk")
    assert (disk.inputs["performanceLevel"], disk.inputs["size"]) == ("PL3", 1261)


def test_dlc_stack_gets_only_the_bucket(engine, fake_dlc):
    engine.declare(dlc_plan())
    assert len(engine.of_type(BUCKET)) == 1
    for token in (CPFS, "ecs/ecsDisk:EcsDisk", "ecs/instance:Instance"):
        assert engine.of_type(token) == []


def test_mount_points_are_exported_as_plain_paths(engine):
    plan = multi_node_erdma_plan()
    stack = engine.declare(plan)
    assert plan.storage.checkpoint == "cpfs"  # the bucket holds the job settings and the heartbeats
    bucket = stack.plan.storage.oss.bucket
    assert stack.outputs["mount_points"] == {
        "checkpoints": "/mnt/cpfs/checkpoints", "data_disk": "/mnt/data", "cpfs": "/mnt/cpfs",
        "status": f"oss://{bucket}/status/", "job_settings": f"oss://{bucket}/job/settings.json"}


def test_cpfs_export_address_is_looked_up_for_the_export_the_stack_creates(engine):
    stack = engine.declare(multi_node_erdma_plan())
    (lookup,) = [r for r in engine.of_type("pulumi-python:dynamic:Resource") if r.inputs.get("kind") == "cpfs-export-address"]
    target = engine.one("nas/protocolMountTarget:ProtocolMountTarget")
    assert lookup.inputs["file_system_id"] == f"filesystem-{engine.one(CPFS).name}"
    assert lookup.inputs["export_id"] == f"exp-{target.name}"
    assert lookup.inputs["region"] == "cn-shenzhen"
    assert target.urn in lookup.dependencies
    assert engine.value(stack.storage.cpfs_mount_address) == engine.mocks.cpfs_domain


def test_cpfs_export_address_waits_for_the_domain_then_fails_clearly(monkeypatch):
    from components import cpfs_export
    from trainstack.errors import CloudApiError

    answers = iter([None, None, "cpfs-1.cn-shenzhen.cpfs.aliyuncs.com"])
    monkeypatch.setattr(cpfs_export, "lookup", lambda region, fs, export: next(answers))
    props = {"region": "cn-shenzhen", "file_system_id": "cpfs-1", "export_id": "exp-1"}
    sleeps = []
    assert cpfs_export._domain(props, sleep=sleeps.append) == "cpfs-1.cn-shenzhen.cpfs.aliyuncs.com"
    assert len(sleeps) == 2

    monkeypatch.setattr(cpfs_export, "lookup", lambda region, fs, export: None)
    with pytest.raises(CloudApiError, match="has no mount domain yet"):
        cpfs_export._domain(props, sleep=lambda s: None)

    def boom(region, fs, export):
        raise RuntimeError("InvalidAccessKeyId.NotFound")

    monkeypatch.setattr(cpfs_export, "lookup", boom)
    with pytest.raises(CloudApiError, match="InvalidAccessKeyId"):
        cpfs_export._domain(props, sleep=lambda s: None)


def test_too_many_profile_tags_is_a_clear_error_before_anything_is_declared():
    # 15 profile tags + 6 trainstack markers on a GPU node > 20 (ECS); the bucket takes 20 too
    with pytest.raises(InputError, match="a GPU node takes at most 20 tags"):
        single_gpu_lora_plan(profile={"tags": {f"k{i}": "v" for i in range(15)}})
    with pytest.raises(InputError, match="an OSS bucket takes at most 20 tags"):
        dlc_plan(profile={"tags": {f"k{i}": "v" for i in range(18)}})  # + team, + name, + role
