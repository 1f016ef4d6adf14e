"""The node role's rights on what the stack writes: the status policy writes and reads only this
plan's node prefixes under status/; every object `pulumi up` writes under job/ (the job settings,
the node programs and their manifest) is readable by the node role and writable by none of its
statements, so a node can never change what another node runs; concrete resources, within RAM's size
limit."""

from __future__ import annotations

import fnmatch
import json

import pytest
from hypothesis import given, settings, strategies as st
from plan_factory import dlc_plan, multi_node_erdma_plan, single_gpu_lora_plan, spot_plan, spot_pool_plan

from components.identity import oss_policy_document, status_policy_document
from trainstack.bootstrap.programs import PROGRAMS
from trainstack.catalog.limits import service_limits

WRITES = ("oss:PutObject", "oss:DeleteObject", "oss:AbortMultipartUpload")


def node_role_statements(engine) -> list[dict]:
    """Every statement of every custom policy attached to the node role (as the engine registered them)."""
    out = []
    for policy in engine.of_type("ram/policy:Policy"):
        out += json.loads(policy.inputs["policyDocument"])["Statement"]
    return out


def allows(statements: list[dict], action: str, resource: str) -> bool:
    """RAM's verdict on one object action (no Deny statements here; a condition only narrows listing)."""
    for s in statements:
        resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
        if s["Effect"] == "Allow" and "Condition" not in s and action in s["Action"] and any(
                fnmatch.fnmatchcase(resource, r) for r in resources):
            return True
    return False


def test_the_status_policy_names_each_nodes_prefix_and_nothing_under_job(engine):
    plan = multi_node_erdma_plan(nodes=3)  # checkpoints on CPFS: the bucket holds only the heartbeats
    bucket = plan.storage.oss.bucket
    doc = status_policy_document(plan)
    write, listing = doc["Statement"]
    assert write["Action"] == ["oss:PutObject", "oss:GetObject"]
    assert write["Resource"] == [f"acs:oss:*:*:{bucket}/status/llama3-70b-full-node-{r}/*" for r in range(3)]
    assert listing["Resource"] == [f"acs:oss:*:*:{bucket}"]
    assert listing["Condition"]["StringLike"]["oss:Prefix"] == [f"status/llama3-70b-full-node-{r}/*" for r in range(3)]
    assert "job/" not in json.dumps(doc), "the programs are read through the OSS policy's job/ statement"
    engine.declare(plan)
    (policy,) = [r for r in engine.of_type("ram/policy:Policy") if r.name.endswith("-status")]
    assert json.loads(policy.inputs["policyDocument"]) == status_policy_document(engine.result.plan)
    assert policy.inputs["rotateStrategy"] == "DeleteOldestNonDefaultVersionWhenLimitExceeded"
    (attachment,) = [r for r in engine.of_type("ram/rolePolicyAttachment:RolePolicyAttachment")
                     if r.name.endswith("-status")]
    assert attachment.inputs["policyType"] == "Custom"


def test_a_large_cluster_names_the_nodes_common_prefix_within_rams_limit():
    plan = multi_node_erdma_plan(nodes=64, profile={"resources": {"max_nodes": 64}})
    doc = status_policy_document(plan)
    assert len(json.dumps(doc)) <= service_limits().number("ram.policy.document.max_characters")
    assert doc["Statement"][0]["Resource"] == [f"acs:oss:*:*:{plan.storage.oss.bucket}/status/llama3-70b-full-node-*"]


def test_dlc_plans_have_no_node_status_policy():
    assert status_policy_document(dlc_plan()) is None


@pytest.mark.parametrize("make", [single_gpu_lora_plan, spot_plan, spot_pool_plan,
                                  lambda: multi_node_erdma_plan(nodes=3)],
                         ids=["single-gpu", "spot", "spot-pool", "multi-node-cpfs"])
def test_every_object_under_job_is_readable_by_the_nodes_and_writable_by_none_of_their_statements(engine, make):
    engine.declare(make())
    bucket = engine.result.plan.storage.oss.bucket
    statements = node_role_statements(engine)
    keys = [o.inputs["key"] for o in engine.of_type("oss/bucketObject:BucketObject")]
    assert len(keys) == len(PROGRAMS) + 2 and all(k.startswith("job/") for k in keys)
    assert sum(k.startswith("job/programs/") for k in keys) == len(PROGRAMS) + 1
    for key in keys:
        arn = f"acs:oss:*:*:{bucket}/{key}"
        assert allows(statements, "oss:GetObject", arn), key
        assert not any(allows(statements, action, arn) for action in WRITES), key
    node = engine.result.plan.node_names()[0]
    assert allows(statements, "oss:PutObject", f"acs:oss:*:*:{bucket}/status/{node}/heartbeat.json")


@settings(max_examples=200, deadline=None)
@given(key=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=80))
def test_no_key_under_job_is_ever_writable_by_the_node_role(key):
    """Whatever a program key could be (a later set, a manifest, settings): never a node's to write."""
    for plan in (single_gpu_lora_plan(), multi_node_erdma_plan(nodes=3)):
        docs = [oss_policy_document(plan), status_policy_document(plan)]
        statements = [s for d in docs if d for s in d["Statement"]]
        arn = f"acs:oss:*:*:{plan.storage.oss.bucket}/job/{key}"
        assert allows(statements, "oss:GetObject", arn)
        assert not any(allows(statements, action, arn) for action in WRITES)
