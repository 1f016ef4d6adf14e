"""The nodes' status policy: write and read only this plan's node prefixes under status/, read (never
write) the heartbeat program; a policy of its own, concrete resources, within RAM's size limit.
The stack writes the heartbeat program the nodes check by sha256."""

from __future__ import annotations

import json

from plan_factory import dlc_plan, multi_node_erdma_plan, single_gpu_lora_plan

from components.identity import status_policy_document
from trainstack.bootstrap import render_script
from trainstack.bootstrap.heartbeat import PROGRAM_KEY, program_sha256, program_text
from trainstack.catalog.limits import service_limits


def test_the_status_policy_names_each_nodes_prefix_and_the_program_read_only(engine):
    plan = multi_node_erdma_plan(nodes=3)  # checkpoints on CPFS: the bucket holds only the heartbeats
    bucket = plan.storage.oss.bucket
    doc = status_policy_document(plan)
    write, program, listing = doc["Statement"]
    assert write["Action"] == ["oss:PutObject", "oss:GetObject"]
    assert write["Resource"] == [f"acs:oss:*:*:{bucket}/status/llama3-70b-full-node-{r}/*" for r in range(3)]
    assert program == {"Effect": "Allow", "Action": ["oss:GetObject"],
                       "Resource": [f"acs:oss:*:*:{bucket}/{PROGRAM_KEY}"]}
    assert listing["Resource"] == [f"acs:oss:*:*:{bucket}"]
    assert listing["Condition"]["StringLike"]["oss:Prefix"] == [f"status/llama3-70b-full-node-{r}/*" for r in range(3)]
    assert not any(PROGRAM_KEY in r for r in write["Resource"]), "a node may not change what the others run"
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


def test_the_stack_writes_the_program_each_node_checks(engine):
    plan = single_gpu_lora_plan()
    engine.declare(plan)
    (obj,) = [o for o in engine.of_type("oss/bucketObject:BucketObject") if o.inputs["key"] == PROGRAM_KEY]
    assert (obj.inputs["key"], obj.inputs["content"]) == (PROGRAM_KEY, program_text())
    assert obj.inputs["acl"] == "private" and obj.parent.endswith("::" + engine.one("oss/bucket:Bucket").name)
    assert f"HEARTBEAT_SHA256={program_sha256()}" in render_script(plan, "node.env")
