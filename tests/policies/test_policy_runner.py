"""policies.runner: the offline planner's way to run the pack, checked against the real analyzer."""

from __future__ import annotations

import json
import pathlib

import pytest
from google.protobuf import struct_pb2
from pulumi.runtime.proto import analyzer_pb2
from pulumi_policy import EnforcementLevel
from pulumi_policy.policy import _PolicyAnalyzerServicer

from policies.rules import ALL_POLICIES
from policies.runner import engine_props, resolve_config, run_policies
from policy_testkit import DYNAMIC, ENI, ENI_ATTACHMENT, INSTANCE, OSS, SG_RULE, UNKNOWN, training_node

NVLINK_8 = "ecs.gn7e-c16g1.32xlarge"
ERDMA_8 = "ecs.ebmgn7ex.32xlarge"


def _stack(node_type=NVLINK_8, nodes=2, **extra):
    out = [{"type": INSTANCE, "name": f"node-{i}", "inputs": training_node(node_type, **extra),
            "parent": "cluster", "protect": False, "provider_region": "cn-shenzhen"} for i in range(nodes)]
    out.append({"type": SG_RULE, "name": "ssh", "inputs": {"type": "ingress", "ipProtocol": "tcp",
                                                             "portRange": "22/22", "cidrIp": "0.0.0.0/0"}})
    ckpt_tags = {"trainstack:role": "checkpoint", "trainstack:name": "test"}
    out.append({"type": OSS, "name": "ckpt", "inputs": {"bucket": "ckpt", "tags": ckpt_tags}, "protect": True})
    return out


def _keys(verdicts):
    return sorted((v["policy"], v["level"], v["resource"]) for v in verdicts)


def test_verdicts_name_policy_level_resource_and_message():
    verdicts = run_policies(_stack())
    assert _keys(verdicts) == [
        ("multi-node-requires-rdma", "mandatory", "node-0"),
        ("multi-node-requires-rdma", "mandatory", "node-1"),
        ("no-public-ssh", "mandatory", "ssh"),
    ]
    assert all(set(v) == {"policy", "level", "resource", "message"} for v in verdicts)
    assert all(v["message"].startswith(v["resource"] + ": ") for v in verdicts)


def test_clean_stack_gives_no_verdicts():
    stack = _stack(ERDMA_8, networkInterfaceTrafficMode="HighPerformance")
    stack[-2]["inputs"]["cidrIp"] = "203.0.113.0/24"
    assert run_policies(stack) == []


def test_config_overrides_levels_and_settings_like_a_policy_pack_config_file():
    config = {"no-public-ssh": "advisory", "multi-node-requires-rdma": {"enforcementLevel": "disabled"},
              "gpu-hourly-budget": {"max_hourly_cost_cny": 100}}
    assert _keys(run_policies(_stack(), config)) == [
        ("gpu-hourly-budget", "mandatory", None),
        ("no-public-ssh", "advisory", "ssh"),
    ]
    everything_advisory = run_policies(_stack(), {"all": "advisory", "no-public-ssh": "mandatory"})
    assert _keys(everything_advisory) == [
        ("multi-node-requires-rdma", "advisory", "node-0"),
        ("multi-node-requires-rdma", "advisory", "node-1"),
        ("no-public-ssh", "mandatory", "ssh"),
    ]


def test_config_properties_reach_the_policy_and_defaults_are_filled():
    stack = [{"type": INSTANCE, "name": "n", "inputs": training_node("ecs.gn7i-8x.32xlarge")}]
    assert [v["policy"] for v in run_policies(stack)] == ["no-pcie-multi-gpu-training"]
    allow = {"no-pcie-multi-gpu-training": {"allowed_types": ["ecs.gn7i-8x.32xlarge"]}}
    assert run_policies(stack, allow) == []
    level, props = resolve_config(None)["required-tags"]
    assert level == EnforcementLevel.ADVISORY and props == {"required_tags": ["trainstack:name"]}


@pytest.mark.parametrize("config, error", [
    ({"no-such-policy": "advisory"}, "unknown policy 'no-such-policy'"),
    ({"no-public-ssh": "blocking"}, "enforcement level 'blocking'"),
    ({"gpu-hourly-budget": {"max_hourly_cost_cny": "lots"}}, "expected number"),
    ({"gpu-hourly-budget": {"max_cost": 5}}, "unknown setting 'max_cost'"),
    ({"required-tags": {"required_tags": [1]}}, "expected a list of strings"),
])
def test_bad_config_is_a_clear_error(config, error):
    with pytest.raises(ValueError, match=error):
        run_policies(_stack(), config)


def test_unknown_values_give_an_advisory_cant_run_verdict():
    stack = [{"type": INSTANCE, "name": "n", "inputs": training_node(UNKNOWN)}]
    verdicts = run_policies(stack)
    assert {v["level"] for v in verdicts} == {"advisory"}
    assert any(v["policy"] == "known-instance-type" and v["resource"] == "n"
               and "can't run policy 'known-instance-type' during preview" in v["message"] for v in verdicts)


def test_dependencies_by_name_link_eni_attachments_to_instances():
    stack = _stack(ERDMA_8)[:2]
    for i in range(2):
        stack += [
            {"type": ENI, "name": f"eri-{i}", "inputs": {"vswitchId": UNKNOWN,
                                                         "networkInterfaceTrafficMode": "HighPerformance"}},
            {"type": ENI_ATTACHMENT, "name": f"att-{i}", "inputs": {"instanceId": UNKNOWN, "networkInterfaceId": UNKNOWN},
             "property_dependencies": {"instanceId": [f"node-{i}"], "networkInterfaceId": [f"eri-{i}"]}},
        ]
    assert [v for v in run_policies(stack) if v["policy"] == "multi-node-requires-rdma"] == []


def test_inputs_are_shaped_like_the_engine_sends_them():
    props = engine_props({"size": 1000, "disks": ({"size": 20},), "ok": True})
    assert props["size"] == 1000.0 and isinstance(props["size"], float)
    assert props["disks"][0]["size"] == 20.0 and props["ok"] is True


# ---- the runner agrees with pulumi-policy's own analyzer --------------------------------------
def _struct(inputs):
    s = struct_pb2.Struct()
    s.update(inputs)
    return s


def _engine(resources, config):
    svc = _PolicyAnalyzerServicer("trainstack-guardrails", "0.0.1", ALL_POLICIES, EnforcementLevel.MANDATORY)
    pc = {}
    for name, (level, props) in resolve_config(config).items():
        pc[name] = analyzer_pb2.PolicyConfig(enforcementLevel=svc._map_enforcement_level(level),
                                             properties=_struct(props))
    svc.Configure(analyzer_pb2.ConfigureAnalyzerRequest(policyConfig=pc), None)
    urns = {r["name"]: f"urn:pulumi:dev::p::{r['type']}::{r['name']}" for r in resources}
    opts = {r["name"]: analyzer_pb2.AnalyzerResourceOptions(protect=bool(r.get("protect"))) for r in resources}
    out = []
    for r in resources:
        resp = svc.Analyze(analyzer_pb2.AnalyzeRequest(type=r["type"], name=r["name"], urn=urns[r["name"]],
                                                       properties=_struct(r["inputs"]), options=opts[r["name"]]),
                           None)
        out += [(d.policyName, d.enforcementLevel, d.message.split("\n", 1)[-1]) for d in resp.diagnostics]
    stack = [analyzer_pb2.AnalyzerResource(type=r["type"], name=r["name"], urn=urns[r["name"]],
                                           properties=_struct(r["inputs"]), options=opts[r["name"]])
             for r in resources]
    resp = svc.AnalyzeStack(analyzer_pb2.AnalyzeStackRequest(resources=stack), None)
    out += [(d.policyName, d.enforcementLevel, d.message.split("\n", 1)[-1]) for d in resp.diagnostics]
    return sorted(out)


def test_runner_matches_the_pulumi_policy_analyzer():
    resources = [{k: v for k, v in r.items() if k != "provider_region"} for r in _stack(nodes=3)]
    resources[0]["inputs"]["dataDisks"] = [{"category": "cloud_essd", "performanceLevel": "PL3", "size": 1000}]
    resources[1]["inputs"].update(spotStrategy="SpotAsPriceGo", deploymentSetId=UNKNOWN)
    resources.append({"type": DYNAMIC, "name": "job", "inputs": {"kind": "pai-dlc-job", "ecs_spec": "ecs.gn7-xlarge"}})
    config = {"gpu-hourly-budget": {"max_hourly_cost_cny": 10.0}, "required-tags": {"required_tags": ["owner"]}}
    ours = run_policies(resources, config)
    mandatory = analyzer_pb2.MANDATORY
    theirs = _engine(resources, config)
    assert sorted((v["policy"], mandatory if v["level"] == "mandatory" else analyzer_pb2.ADVISORY, v["message"])
                  for v in ours) == theirs
    assert {v["policy"] for v in ours} >= {"essd-minimum-size", "no-spot-in-deployment-set", "known-instance-type",
                                           "multi-node-requires-rdma", "gpu-hourly-budget", "required-tags",
                                           "no-public-ssh"}


def test_example_policy_pack_config_is_valid():
    example = json.loads((pathlib.Path(__file__).resolve().parents[2] / "stacks" / "policy-config.example.json").read_text())
    settings = resolve_config(example)
    assert settings["gpu-hourly-budget"] == (EnforcementLevel.MANDATORY, {"max_hourly_cost_cny": 500})
