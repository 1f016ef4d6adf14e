"""Hand-checked cases: what `pulumi up` does after one routine edit, read by hand from the provider.

Each row changes one input of a resource taken from a real offline plan (the sample stacks and
variants in sample_plans.py) and states what terraform-provider-alicloud does with that change,
with the line of its source that says so (alicloud/... at the commit named in
trainstack/catalog/data/provider_facts.json: release/v2, ace5bcf8777e). The expectations were read
from the Go source, not from the generated data, so the diff is checked against something it did
not produce. When the facts are regenerated from another commit and a line moves, re-read it.

The rows state the provider's behaviour: the resource's own lifecycle options from the program
(``ignore_changes``, ``delete_before_replace``, which the day-two program sets on GPU nodes) are
cleared unless a row declares them, and ``seed`` puts back inputs the program no longer sets (a
data disk declared on the instance, a protocol throughput), so each row keeps checking the fact
that made the program change (tests/preview/test_day_two.py checks the program itself).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any, Optional

import pytest

import sample_plans
from trainstack.preview.diff import diff_documents, empty_plan
from trainstack.preview.render_diff import render_markdown

INSTANCE = "alicloud:ecs/instance:Instance"
I = "alicloud/resource_alicloud_instance.go"
STOP, START = f"{I}:1929", f"{I}:1972"  # StopInstance / StartInstance around every stop-requiring update


@dataclass(frozen=True)
class Case:
    id: str
    plan: str                   # sample plan the resource comes from
    type: str
    path: str                   # the input changed
    after: Any
    replace: bool
    disruptive: bool
    action: str                 # replace | update | no-api-call
    cite: tuple[str, ...]       # provider lines that decide it (hand-read)
    why: str
    provider_features: Optional[dict] = None
    ignore_changes: tuple[str, ...] = ()
    replace_on_changes: tuple[str, ...] = ()
    delete_before_replace: Optional[bool] = None
    seed: Optional[dict] = None  # inputs on both sides the program no longer sets


CASES = [
    Case("spot-duration-is-stored-only", "qwen-7b-spot", INSTANCE, "spotDuration", 0.0, False, False, "no-api-call",
         (f"{I}:586",), "spot_duration is Optional+Computed, not ForceNew; Update never checks it"),
    Case("vswitch-moves-a-stopped-node", "llama3-8b-lora", INSTANCE, "vswitchId", "vsw-other", False, True, "update",
         (f"{I}:2983", STOP, START), "modifyVpcAttribute -> ModifyInstanceVpcAttribute between stop and start"),
    Case("private-ip-needs-a-stop", "llama3-8b-lora", INSTANCE, "privateIp", "10.0.0.99", False, True, "update",
         (f"{I}:2983", STOP), "private_ip goes through ModifyInstanceVpcAttribute too"),
    Case("user-data-restarts-the-node", "llama3-8b-lora", INSTANCE, "userData", "IyEvYmluL3NoCmVjaG8gbmV3Cg==",
         False, True, "update", (f"{I}:2865", STOP, START),
         "modifyInstanceAttribute sets reboot = true; the update then stops and starts the node"),
    Case("host-name-restarts-the-node", "llama3-8b-lora", INSTANCE, "hostName", "renamed", False, True, "update",
         (f"{I}:2871", STOP), "host_name also sets reboot = true"),
    Case("image-wipes-the-system-disk", "llama3-8b-lora", INSTANCE, "imageId", "m-new-image", False, True, "update",
         (f"{I}:2785", STOP), "without the provider feature, ReplaceSystemDisk on the stopped node"),
    Case("image-replaces-with-the-feature", "llama3-8b-lora", INSTANCE, "imageId", "m-new-image", True, False,
         "replace", (f"{I}:2680",), "CustomizeDiff: diff.ForceNew(\"image_id\") when replace_on_image_update",
         provider_features={"ecsInstance": {"replaceOnImageUpdate": True}}),
    Case("type-change-stops-the-node", "llama3-8b-lora", INSTANCE, "instanceType", "ecs.gn7i-c16g1.4xlarge", False,
         True, "update", (f"{I}:3068", STOP), "ModifyInstanceSpec (PostPaid) between stop and start"),
    Case("traffic-mode-replaces", "llama3-8b-lora", INSTANCE, "networkInterfaceTrafficMode", "HighPerformance", True,
         False, "replace", (f"{I}:207",), "network_interface_traffic_mode is ForceNew"),
    Case("queue-pairs-replace", "llama3-70b-full", INSTANCE, "queuePairNumber", 16.0, True, False, "replace",
         (f"{I}:220",), "queue_pair_number is ForceNew"),
    Case("data-disk-size-replaces", "llama3-8b-lora", INSTANCE, "dataDisks[0].size", 400.0, True, False, "replace",
         (f"{I}:245",), "data_disks.size is ForceNew", seed={"dataDisks": [{"category": "cloud_essd", "performanceLevel": "PL1", "size": 200.0, "encrypted": True,
                               "deleteWithInstance": True}]}),
    Case("data-disk-level-is-stored-only", "llama3-8b-lora", INSTANCE, "dataDisks[0].performanceLevel", "PL2", False,
         False, "no-api-call", (f"{I}:289",), "data_disks.performance_level: not ForceNew, no HasChange(data_disks)",
         seed={"dataDisks": [{"category": "cloud_essd", "performanceLevel": "PL1", "size": 200.0, "encrypted": True,
                               "deleteWithInstance": True}]}),
    Case("secondary-eri-vswitch-replaces", "llama3-70b-full", INSTANCE, "networkInterfaces.vswitchId", "vsw-other",
         True, False, "replace", (f"{I}:325",), "network_interfaces.vswitch_id is ForceNew"),
    Case("spot-strategy-replaces", "llama3-8b-lora", INSTANCE, "spotStrategy", "SpotAsPriceGo", True, False, "replace",
         (f"{I}:458",), "spot_strategy is ForceNew"),
    Case("spot-bid-replaces", "qwen-7b-spot", INSTANCE, "spotPriceLimit", 1.0, True, False, "replace",
         (f"{I}:466",), "spot_price_limit is ForceNew"),
    Case("tags-update-in-place", "llama3-8b-lora", INSTANCE, "tags.team", "vision", False, False, "update",
         ("alicloud/tags.go:181",), "setTags (called first in Update) checks HasChange(\"tags\")"),
    Case("security-groups-join-in-place", "llama3-8b-lora", INSTANCE, "securityGroups", ["sg-a", "sg-b"], False,
         False, "update", (f"{I}:1712",), "Join/LeaveSecurityGroups on the running node"),
    Case("system-disk-grows-online", "llama3-8b-lora", INSTANCE, "systemDiskSize", 400.0, False, False, "update",
         (f"{I}:1738",), "ResizeDisk, online while the node runs"),
    Case("deployment-set-moves-in-place", "llama3-8b-lora", INSTANCE, "deploymentSetId", "ds-1", False, False,
         "update", (f"{I}:2195",), "ModifyInstanceDeployment, no stop in the provider"),
    Case("ignored-user-data-is-no-change", "llama3-8b-lora", INSTANCE, "userData", "bmV3Cg==", False, False, "ignored",
         (), "the program lists userData in ignore_changes", ignore_changes=("userData",)),
    Case("declared-replace-on-changes", "llama3-8b-lora", INSTANCE, "tags.team", "vision", True, False, "replace",
         (), "the program lists tags in replace_on_changes", replace_on_changes=("tags",)),
    Case("declared-delete-before-replace", "llama3-8b-lora", INSTANCE, "dataDisks[0].size", 400.0, True, False,
         "replace", (f"{I}:245",), "ForceNew, and the program asks to delete first", delete_before_replace=True,
         seed={"dataDisks": [{"category": "cloud_essd", "performanceLevel": "PL1", "size": 200.0, "encrypted": True,
                               "deleteWithInstance": True}]}),
    Case("cpfs-throughput-replaces-the-protocol-service", "llama3-70b-full", "alicloud:nas/protocolService:ProtocolService",
         "protocolThroughput", 1200.0, True, False, "replace", ("alicloud/resource_alicloud_nas_protocol_service.go:57",),
         "protocol_throughput is ForceNew", seed={"protocolThroughput": 600.0}),
    Case("cpfs-capacity-grows-in-place", "llama3-70b-full", "alicloud:nas/fileSystem:FileSystem", "capacity", 7200.0,
         False, False, "update", ("alicloud/resource_alicloud_nas_file_system.go:735",), "HasChange(\"capacity\")"),
    Case("vswitch-cidr-replaces", "llama3-8b-lora", "alicloud:vpc/switch:Switch", "cidrBlock", "10.0.16.0/20", True,
         False, "replace", ("alicloud/resource_alicloud_vswitch.go:32",), "cidr_block is ForceNew"),
    Case("vswitch-name-in-place", "llama3-8b-lora", "alicloud:vpc/switch:Switch", "vswitchName", "renamed", False,
         False, "update", ("alicloud/resource_alicloud_vswitch.go:281",), "HasChange(\"vswitch_name\")"),
    Case("sg-rule-port-replaces", "llama3-70b-full", "alicloud:ecs/securityGroupRule:SecurityGroupRule", "portRange",
         "2222/2222", True, False, "replace", ("alicloud/resource_alicloud_security_group_rule.go:100",),
         "port_range is ForceNew"),
    Case("checkpoint-disk-grows-in-place", "llama3-70b-essd", "alicloud:ecs/ecsDisk:EcsDisk", "size", 4096.0, False,
         False, "update", ("alicloud/resource_alicloud_ecs_disk.go:487",), "ResizeDisk on HasChange(\"size\")"),
    Case("checkpoint-disk-zone-replaces", "llama3-70b-essd", "alicloud:ecs/ecsDisk:EcsDisk", "zoneId",
         "cn-shenzhen-e", True, False, "replace", ("alicloud/resource_alicloud_ecs_disk.go:164",), "zone_id is ForceNew"),
    Case("disk-attachment-replacement-detaches", "llama3-70b-essd", "alicloud:ecs/ecsDiskAttachment:EcsDiskAttachment",
         "instanceId", "i-other", True, True, "replace",
         ("alicloud/resource_alicloud_ecs_disk_attachment.go:47", "alicloud/resource_alicloud_ecs_disk_attachment.go:179"),
         "instance_id is ForceNew; Delete calls DetachDisk on the running node"),
    Case("bucket-name-replaces", "llama3-8b-lora", "alicloud:oss/bucket:Bucket", "bucket", "other-bucket", True,
         False, "replace", ("alicloud/resource_alicloud_oss_bucket.go:29",), "bucket is ForceNew"),
    Case("bucket-versioning-in-place", "llama3-8b-lora", "alicloud:oss/bucket:Bucket", "versioning.status",
         "Suspended", False, False, "update", ("alicloud/resource_alicloud_oss_bucket.go:1071",),
         "HasChange(\"versioning\")"),
    Case("ram-policy-new-version", "llama3-8b-lora", "alicloud:ram/policy:Policy", "policyDocument(json).Version",
         "2", False, False, "update",
         ("alicloud/resource_alicloud_ram_policy.go:284",), "CreatePolicyVersion on HasChange(\"policy_document\")"),
    Case("spot-pool-template-only", "qwen-7b-heal", "pulumi-python:dynamic:Resource",
         "userData", "bmV3Cg==", False, False, "update", ("components/ess_pool.py:",),
         "EssConfigurationProvider.update: ModifyScalingConfiguration, only nodes created later get it"),
    Case("scale-to-zero-rule-in-place", "qwen-7b-heal", "alicloud:ess/scalingRule:ScalingRule",
         "adjustmentValue", 1, False, False, "update", ("alicloud/resource_alicloud_ess_scaling_rule.go:399",),
         "ModifyScalingRule on HasChange(\"adjustment_value\")"),
    Case("dlc-job-is-replaced-delete-first", "qwen-7b-dlc", "pulumi-python:dynamic:Resource", "command",
         "torchrun train.py --epochs 2", True, False, "replace", ("components/dlc.py:",),
         "DlcJobProvider.diff replaces on any input, delete_before_replace=True"),
    Case("cpfs-address-new-export", "llama3-70b-full", "pulumi-python:dynamic:Resource", "export_id", "exp-other",
         True, False, "replace", ("components/cpfs_export.py:",), "the lookup's diff replaces on export_id"),
]


def _resource(plan: dict, type_: str, kind: Optional[str] = None) -> dict:
    for r in plan["resources"]:
        if r["type"] == type_ and (kind is None or (r.get("inputs") or {}).get("kind") == kind):
            return r
    raise AssertionError(f"no {type_} in the plan")


def _set(inputs: dict, path: str, value: Any) -> None:
    if "(json)" in path:  # a JSON document held in a string input (a RAM policy)
        outer, inner = path.split("(json).", 1)
        doc = json.loads(inputs[outer])
        _set(doc, inner, value)
        inputs[outer] = json.dumps(doc)
        return
    parts = [p for p in re.split(r"\.|\[(\d+)\]", path) if p]
    target: Any = inputs
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        key: Any = int(part) if part.isdigit() else part
        if isinstance(target, dict) and key not in target:
            target[key] = [] if nxt.isdigit() else {}
        target = target[key]
    last = parts[-1]
    target[int(last) if last.isdigit() else last] = value


def _side(plan: dict, resources: list[dict]) -> dict:
    return dict(empty_plan(), stack=plan["stack"], profile={}, resources=resources)


def run_case(case: Case) -> dict:
    plan = sample_plans.plan(case.plan)
    kind = {"command": "pai-dlc-job", "export_id": "cpfs-export-address",
            "userData": "ess-scaling-configuration"}.get(case.path) \
        if case.type.startswith("pulumi-python") else None
    base = copy.deepcopy(_resource(plan, case.type, kind))
    provider = copy.deepcopy(next(r for r in plan["resources"] if r["type"].startswith("pulumi:providers:")))
    # options the program declares on both sides (the pull request changes only the input)
    base["ignore_changes"] = list(case.ignore_changes)
    base["replace_on_changes"] = list(case.replace_on_changes)
    if not base["type"].startswith("pulumi-python:"):  # a dynamic provider's own diff decides for it
        base["delete_before_replace"] = bool(case.delete_before_replace)
    base["inputs"].update(copy.deepcopy(case.seed or {}))
    head, head_provider = copy.deepcopy(base), copy.deepcopy(provider)
    _set(head["inputs"], case.path, case.after)
    if case.provider_features:
        head_provider["inputs"]["features"] = case.provider_features
    return diff_documents(_side(plan, [provider, base]), _side(plan, [head_provider, head]))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_the_diff_matches_the_hand_checked_provider_behaviour(case):
    d = run_case(case)
    changed = [c for c in d["resources"]["changed"] if c["type"] == case.type]
    if case.action == "ignored":
        assert changed == []
        (ignored,) = d["resources"]["ignored"]
        assert [c["path"] for c in ignored["changes"]] == [case.path]
        return
    (entry,) = changed
    (change,) = entry["changes"]
    assert (change["path"], change["replace"], change["disruptive"], change["action"]) == \
        (case.path, case.replace, case.disruptive and not case.replace, case.action), change["reason"]
    assert (entry["replace"], entry["disruptive"]) == (case.replace, case.disruptive)
    for line in case.cite:
        assert line in change["reason"] + " ".join(entry.get("reasons", [])), (line, change["reason"])
    if case.replace:
        expected_dbr = case.delete_before_replace or case.id.startswith("dlc-")
        assert entry["delete_before_replace"] is bool(expected_dbr)


def test_a_job_command_change_on_ecs_reads_as_a_restart_not_a_harmless_update():
    """The issue's motivating case: a new job command reaches the node only through user data."""
    case = next(c for c in CASES if c.id == "user-data-restarts-the-node")
    md = render_markdown(run_case(case))
    top = md.split("| | Before | After | Delta |")[0]  # the node section comes before the cost table
    assert "GPU nodes replaced, disrupted or destroyed" in top and "⚠ disrupt" in top
    assert "stops and restarts the running node" in top
    assert "does not run the new script" in top


def test_every_sample_plan_resource_has_facts_for_every_input():
    from trainstack.catalog.provider_facts import load_provider_facts

    facts = load_provider_facts()
    for name, plan in sample_plans.all_plans().items():
        for r in plan["resources"]:
            if not r["custom"] or r["type"].startswith("pulumi:providers:") or r["type"].startswith("pulumi-python"):
                continue
            rf = facts.resource(r["type"])
            assert rf is not None, (name, r["type"])
            from trainstack.preview.diff import flatten

            missing = [p for p, _ in flatten(r["inputs"]) if rf.argument(p) is None]
            assert missing == [], (name, r["name"], missing)


def test_a_create_before_delete_replacement_that_keeps_the_fixed_ip_is_a_warning():
    """Pulumi creates the replacement first; the old node still holds its private IP."""
    replace = next(c for c in CASES if c.id == "data-disk-size-replaces")
    (warning,) = [w for w in run_case(replace)["warnings"] if "privateIp" in w]
    assert "created before the old one is deleted" in warning and "set delete_before_replace" in warning
    first_delete = next(c for c in CASES if c.id == "declared-delete-before-replace")
    assert not [w for w in run_case(first_delete)["warnings"] if "privateIp" in w]
