"""`trainstack plan --format json` for each sample stack: the real resolver, catalog, program and
policy pack, checked for the resources and verdicts each stack is meant to produce."""

from __future__ import annotations

import json
import pathlib

import pytest
import yaml

from trainstack.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
INSTANCE = "alicloud:ecs/instance:Instance"
NETWORK = {"alicloud:vpc/network:Network", "alicloud:vpc/switch:Switch", "alicloud:ecs/securityGroup:SecurityGroup"}


@pytest.fixture(autouse=True)
def at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def plan_json(capsys, *args) -> tuple[int, dict]:
    code = main(["plan", *args, "--format", "json"])
    out = capsys.readouterr().out
    return code, json.loads(out)


def of_type(doc, type_):
    return [r for r in doc["resources"] if r["type"] == type_]


def common(doc, stack):
    assert doc["schema_version"] == 3 and doc["stack"] == stack
    assert doc["plan"]["name"] == stack and doc["catalog_date"]
    types = {r["type"] for r in doc["resources"]}
    assert NETWORK | {"trainstack:index:TrainingStack", "pulumi:providers:alicloud"} <= types
    assert not [v for v in doc["policy"] if v["level"] == "mandatory"], doc["policy"]
    # every exported node IP is a node's fixed private IP
    ips = [r["inputs"]["privateIp"] for r in of_type(doc, INSTANCE)]
    assert doc["exports"].get("node_private_ips", []) == ips


def test_llama3_8b_lora_is_one_single_gpu_node_with_oss_checkpoints(capsys):
    code, doc = plan_json(capsys, "--stack", "llama3-8b-lora")
    assert code == 0
    common(doc, "llama3-8b-lora")
    (node,) = of_type(doc, INSTANCE)
    p = node["inputs"]
    assert p["instanceType"] == doc["plan"]["instance_type"] and doc["plan"]["gpus_per_node"] == 1
    assert p["spotStrategy"] == "NoSpot" and p["tags"]["trainstack:role"] == "training"
    assert p["tags"]["trainstack:zone"] == doc["summary"]["zone"]
    (bucket,) = of_type(doc, "alicloud:oss/bucket:Bucket")
    # the stack-unique name the program completes at deploy time (offline: the preview's stand-in account)
    name = bucket["inputs"]["bucket"]
    assert bucket["protect"] and name.startswith("llama3-8b-lora-") and len(name) == len("llama3-8b-lora-") + 10
    assert name != doc["plan"]["storage"]["oss"]["bucket"] and doc["exports"]["oss_bucket"] == name
    assert of_type(doc, "alicloud:nas/fileSystem:FileSystem") == []
    assert doc["policy"] == []


def test_llama3_70b_full_is_several_erdma_nodes_with_cpfs(capsys):
    code, doc = plan_json(capsys, "--stack", "llama3-70b-full")
    assert code == 0
    common(doc, "llama3-70b-full")
    nodes = of_type(doc, INSTANCE)
    assert len(nodes) == doc["plan"]["nodes"] > 1
    for n in nodes:
        assert n["inputs"]["instanceType"] == doc["plan"]["instance_type"]
        assert n["inputs"]["networkInterfaceTrafficMode"] == "HighPerformance"  # eRDMA
    assert len({n["inputs"]["tags"]["trainstack:zone"] for n in nodes}) == 1
    # ebmgn7ex supports LowLatency deployment sets [DSET-ZH]: one set (at most 20 nodes) holds them all
    (dset,) = of_type(doc, "alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet")
    assert dset["inputs"]["strategy"] == "LowLatency" and doc["plan"]["network"]["deployment_set"] == "LowLatency"
    assert len({n["inputs"]["deploymentSetId"] for n in nodes}) == 1
    (cpfs,) = of_type(doc, "alicloud:nas/fileSystem:FileSystem")
    assert cpfs["inputs"]["fileSystemType"] == "cpfs" and cpfs["protect"]
    assert doc["policy"] == []


def test_qwen_7b_spot_bids_at_most_the_on_demand_price(capsys):
    code, doc = plan_json(capsys, "--stack", "qwen-7b-spot")
    assert code == 0
    common(doc, "qwen-7b-spot")
    (node,) = of_type(doc, INSTANCE)
    assert node["inputs"]["spotStrategy"] == "SpotWithPriceLimit"
    assert node["inputs"]["spotPriceLimit"] == doc["plan"]["spot_price_limit"]
    assert doc["plan"]["spot_price_limit"] <= doc["cost"]["on_demand"]["hourly_cny"]
    assert doc["cost"]["pricing"] == "spot"
    assert doc["policy"] == []


def test_qwen_7b_dlc_is_a_dlc_job_with_its_request_body(capsys, tmp_path):
    # The sample profile leaves the PAI image tag open (`dlc.image_tag`); pin one in a copy if so.
    doc = yaml.safe_load((ROOT / "stacks" / "profiles" / "qwen-7b-dlc.yaml").read_text())
    dlc = dict(doc.get("dlc") or {})
    dlc["image_tag"] = dlc.get("image_tag") or "2.3.0-gpu-py311-cu121-ubuntu22.04"
    doc["dlc"] = dlc
    profile = tmp_path / "qwen-7b-dlc.yaml"
    profile.write_text(yaml.safe_dump(doc))
    code, plan = plan_json(capsys, str(profile))
    assert code == 0
    common(plan, "qwen-7b-dlc")
    assert of_type(plan, INSTANCE) == []
    (job,) = [r for r in plan["resources"] if r["inputs"].get("kind") == "pai-dlc-job"]
    body = plan["dlc_request"]["body"]
    assert plan["dlc_request"]["resource"] == job["name"]
    assert body["JobSpecs"][0]["EcsSpec"] == plan["plan"]["dlc"]["ecs_spec"]
    assert body["JobSpecs"][0]["PodCount"] == plan["plan"]["dlc"]["pod_count"]
    assert body["UserVpc"]["VpcId"].startswith("vpc-offline")
    assert plan["policy"] == []
