"""Every input the components set is covered by the provider facts the diff reads.

If a component starts setting an argument (or creating a resource type) the generated data does
not describe, `trainstack diff` could not say whether changing it replaces or disrupts anything:
this test fails and names it. Regenerate with tools/provider_facts.py (its --help) after adding
the type to its RESOURCES table.
"""

from __future__ import annotations

import pytest

from plan_factory import dlc_plan, multi_node_erdma_plan, single_gpu_lora_plan, spot_plan, spot_pool_plan
from trainstack.catalog.provider_facts import load_provider_facts
from trainstack.preview.diff import flatten

DYNAMIC = "pulumi-python:dynamic:Resource"


def _network(plan, **update):
    return plan.model_copy(update={"network": plan.network.model_copy(update=update)})


PLANS = {
    "lora+egress+ssh+key": _network(
        single_gpu_lora_plan(profile={"network": {"internet_egress": True}, "access": {"ssh_cidrs": ["203.0.113.0/24"]}}),
        key_pair="team-key"),
    # hand-edited: a LowLatency deployment set (more than two ERIs are refused: no queue pair number
    # on an ecs_network_interface, so trainstack creates none)
    "erdma+deployment-set": _network(multi_node_erdma_plan(nodes=3), deployment_set="LowLatency",
                                     deployment_set_groups=1),
    "essd-checkpoints": multi_node_erdma_plan(nodes=3, profile={"storage": {"checkpoint": "essd"}}),
    "spot": spot_plan(),
    "spot-pool": spot_pool_plan(),
    "dlc": dlc_plan(),
}


def uncovered(registrations) -> list[str]:
    facts = load_provider_facts()
    out = []
    for r in registrations:
        if not r.custom or r.type.startswith("pulumi:providers:"):
            continue
        inputs = {k: v for k, v in r.inputs.items() if not k.startswith("__")}
        if r.type == DYNAMIC:
            dyn = facts.dynamic(inputs.get("kind"))
            if dyn is None:
                out.append(f"{r.name}: dynamic kind {inputs.get('kind')!r} has no facts")
            else:
                out += [f"{r.name}: {k}" for k in inputs if k not in (*dyn.replace, *dyn.outputs, *dyn.not_compared, *dyn.updated)]
            continue
        rf = facts.resource(r.type)
        if rf is None:
            out.append(f"{r.name}: type {r.type} has no facts")
            continue
        out += [f"{r.name} ({r.type}): {path}" for path, _ in flatten(inputs) if rf.argument(path) is None]
    return out


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_input_the_components_set_has_provider_facts(engine, name):
    engine.declare(PLANS[name])
    assert engine.resources, "nothing declared"
    assert uncovered(engine.resources) == []


def test_the_plans_above_reach_every_resource_type_the_components_create(engine_factory):
    seen: set[str] = set()
    for plan in PLANS.values():
        eng = engine_factory()
        eng.declare(plan)
        seen |= {r.type for r in eng.resources if r.custom and not r.type.startswith("pulumi:providers:")}
    for token in ("alicloud:ecs/ecsDeploymentSet:EcsDeploymentSet", "alicloud:oss/bucketObject:BucketObject",
                  "alicloud:ecs/ecsDisk:EcsDisk", "alicloud:ecs/ecsDiskAttachment:EcsDiskAttachment",
                  "alicloud:ess/scalingGroup:ScalingGroup", "alicloud:ess/scalingRule:ScalingRule",
                  "alicloud:vpc/natGateway:NatGateway", "alicloud:vpc/snatEntry:SnatEntry",
                  "alicloud:nas/protocolService:ProtocolService", "alicloud:pai/workspaceDataset:WorkspaceDataset",
                  DYNAMIC):
        assert token in seen, token
    facts = load_provider_facts()
    assert {t for t in seen if t != DYNAMIC} <= set(facts.resources)


def test_an_input_missing_from_the_data_is_reported(engine):
    engine.declare(single_gpu_lora_plan())
    node = engine.one("ecs/instance:Instance")
    node.inputs["notAnArgument"] = 1
    node.inputs["dataDisks"] = [{"size": 200, "bogus": True}]
    assert sorted(uncovered([node])) == [f"{node.name} (alicloud:ecs/instance:Instance): dataDisks[0].bogus",
                                         f"{node.name} (alicloud:ecs/instance:Instance): notAnArgument"]
