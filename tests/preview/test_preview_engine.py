"""The recording mock engine, on a small program of its own (tests/preview/fixtures/program)."""

from __future__ import annotations

import pathlib

import pulumi
import pytest
from pulumi.runtime import settings

from trainstack.errors import InfeasibleError
from trainstack.preview.cloud import FAKE_IMAGE_ID, OfflineCloud
from trainstack.preview.engine import record_program
from trainstack.preview.values import Secret, public, reveal
from trainstack.secrets import REDACTED

PROGRAM = pathlib.Path(__file__).parent / "fixtures" / "program"
INSTANCE = "alicloud:ecs/instance:Instance"


def record(nodes: int = 2, **config):
    cfg = {"fixture:nodes": str(nodes), **{f"fixture:{k}": v for k, v in config.items()}}
    return record_program(PROGRAM, "fixture", "dev", cfg, cloud=OfflineCloud("cn-shenzhen"))


def by_name(recording):
    return {r.name: r for r in recording.resources}


def test_records_types_names_parents_and_options():
    rec = record(nodes=2)
    res = by_name(rec)
    assert sorted(res) == ["fx", "fx-ckpt", "fx-node-0", "fx-node-1", "fx-sg", "fx-vpc", "fx-vsw"]
    assert res["fx"].type == "fixture:index:Cluster" and not res["fx"].custom
    assert res["fx"].parent_urn is None and res["fx-ckpt"].parent_urn is None
    assert res["fx-node-0"].parent_urn == res["fx"].urn == "urn:pulumi:dev::fixture::fixture:index:Cluster::fx"
    assert res["fx-ckpt"].protect and res["fx-ckpt"].retain_on_delete
    assert not res["fx-vpc"].protect and not res["fx-vpc"].retain_on_delete
    assert res["fx-vpc"].urn in res["fx-vsw"].dependencies
    assert res["fx-vsw"].property_dependencies == {"vpcId": (res["fx-vpc"].urn,)}


def test_inputs_are_camel_case_wire_values_with_offline_answers():
    node = by_name(record())["fx-node-1"]
    p = node.inputs
    assert p["instanceType"] == "ecs.gn7i-c8g1.2xlarge" and p["privateIp"] == "10.0.0.11"
    assert p["dataDisks"] == [{"category": "cloud_essd", "size": 200.0, "performanceLevel": "PL1"}]
    assert isinstance(p["dataDisks"][0]["size"], float)  # numbers reach policies as floats
    assert p["imageId"] == FAKE_IMAGE_ID  # a labelled stand-in, never a real-looking id
    assert p["tags"] == {"trainstack:role": "training", "trainstack:zone": "cn-shenzhen-a"}
    assert p["vswitchId"].startswith("vsw-offline")


def test_secrets_stay_marked_for_policies_and_redacted_for_output():
    node = by_name(record())["fx-node-0"]
    assert isinstance(node.inputs["password"], Secret)
    assert reveal(node.inputs)["password"] == "hunter2-not-real"
    shown = public(node.inputs)
    assert shown["password"] == REDACTED and "hunter2" not in repr(shown)


def test_invokes_and_exports_are_recorded():
    rec = record(nodes=3)
    tokens = [i.token for i in rec.invokes]
    assert tokens.count("alicloud:index/getZones:getZones") == 1
    assert tokens.count("alicloud:ecs/getImages:getImages") == 1
    assert all(i.answered for i in rec.invokes)
    assert rec.exports["node_private_ips"] == ["10.0.0.10", "10.0.0.11", "10.0.0.12"]
    assert rec.exports["vswitch_zone"] == "cn-shenzhen-a"
    assert rec.exports["hourly_cost_cny"] == pytest.approx(28.5)
    assert len(rec.exports["node_ids"]) == 3 and all(i.startswith("i-offline") for i in rec.exports["node_ids"])
    assert rec.component_outputs["urn:pulumi:dev::fixture::fixture:index:Cluster::fx"] == {"node_count": 3}


def test_ids_are_deterministic_across_runs():
    a, b = by_name(record(nodes=1)), by_name(record(nodes=1))
    assert {n: r.id for n, r in a.items()} == {n: r.id for n, r in b.items()}


def test_two_runs_in_one_process_do_not_leak_into_each_other():
    big = record(nodes=5, bucket="big-bucket")
    small = record(nodes=1, bucket="small-bucket")
    assert sum(r.type == INSTANCE for r in big.resources) == 5
    assert sum(r.type == INSTANCE for r in small.resources) == 1
    assert [r.name for r in small.resources if r.type == INSTANCE] == ["fx-node-0"]
    assert by_name(small)["fx-ckpt"].inputs["bucket"] == "small-bucket"
    assert small.exports["node_private_ips"] == ["10.0.0.10"]
    assert len({r.urn for r in small.resources}) == len(small.resources) == 6


def test_the_callers_pulumi_runtime_state_is_untouched():
    before_root, before_monitor = settings.get_root_resource(), settings.SETTINGS.monitor
    before_project = settings.get_project()
    record(nodes=1)
    assert settings.get_root_resource() is before_root
    assert settings.SETTINGS.monitor is before_monitor
    assert settings.get_project() == before_project


def test_a_callers_own_mocks_keep_working_around_a_recording():
    class Mocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            return f"{args.name}-id", args.inputs

        def call(self, args):
            return {}

    pulumi.runtime.set_mocks(Mocks(), project="outer", stack="outer", preview=False)
    try:
        monitor = settings.SETTINGS.monitor
        record(nodes=1)
        assert settings.SETTINGS.monitor is monitor and settings.get_project() == "outer"

        seen = []

        @pulumi.runtime.test
        def declare():
            return pulumi.CustomResource("outer:index:Thing", "thing", {"x": 1}).id.apply(seen.append)

        declare()
        assert seen == ["thing-id"]
    finally:
        settings.reset_options()


@pytest.mark.parametrize("where", ["top", "apply"])
def test_a_trainstack_error_in_the_program_surfaces_unchanged(where):
    with pytest.raises(InfeasibleError) as info:
        record(fail=where)
    assert info.value.exit_code == 3
    assert "fixture:" in info.value.message


def test_a_failed_run_leaves_nothing_behind_for_the_next():
    with pytest.raises(InfeasibleError):
        record(nodes=4, fail="apply")
    rec = record(nodes=1)
    assert sum(r.type == INSTANCE for r in rec.resources) == 1


def test_zones_follow_the_caller():
    rec = record_program(PROGRAM, "fixture", "dev", {"fixture:nodes": "1"},
                         cloud=OfflineCloud("cn-wulanchabu", zones=["cn-wulanchabu-c"]))
    assert rec.exports["vswitch_zone"] == "cn-wulanchabu-c"
    assert by_name(rec)["fx-node-0"].inputs["tags"]["trainstack:zone"] == "cn-wulanchabu-c"


def test_preview_mode_runs_the_program_as_a_dry_run():
    assert record(nodes=1).exports["dry_run"] is False
    rec = record_program(PROGRAM, "fixture", "dev", {"fixture:nodes": "1"}, cloud=OfflineCloud("cn-shenzhen"),
                         preview=True)
    assert rec.exports["dry_run"] is True
    assert sum(r.type == INSTANCE for r in rec.resources) == 1


def test_gc_thresholds_are_restored_after_a_run():
    import gc

    before = gc.get_threshold()
    record(nodes=1)
    assert gc.get_threshold() == before
