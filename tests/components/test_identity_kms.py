"""The node role may read exactly the job's KMS secrets, and nothing from KMS without them."""

from __future__ import annotations

import json

from plan_factory import single_gpu_lora_plan

from components.identity import kms_policy_document
from trainstack.plan import JobPlan, JobSecretPlan


def with_secrets(**secrets):
    return single_gpu_lora_plan(job=JobPlan(command="python train.py", method="lora", precision="bf16",
                                            secrets=secrets))


def test_no_secrets_no_kms_statement(engine):
    assert kms_policy_document(single_gpu_lora_plan()) is None
    engine.declare(single_gpu_lora_plan())
    assert not [r for r in engine.of_type("ram/policy:Policy") if r.name.endswith("-kms")]


def test_the_policy_names_each_secret_and_only_the_keys_given(engine):
    plan = with_secrets(HF_TOKEN=JobSecretPlan(kms_secret="team/hf-token"),
                        WANDB_API_KEY=JobSecretPlan(kms_secret="wandb", kms_key_id="key-abc123"))
    doc = kms_policy_document(plan)
    assert doc == {"Version": "1", "Statement": [
        {"Effect": "Allow", "Action": ["kms:GetSecretValue"],
         "Resource": ["acs:kms:cn-shenzhen:*:secret/team/hf-token", "acs:kms:cn-shenzhen:*:secret/wandb"]},
        {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": ["acs:kms:cn-shenzhen:*:key/key-abc123"]}]}
    engine.declare(plan)
    (policy,) = [r for r in engine.of_type("ram/policy:Policy") if r.name.endswith("-kms")]
    assert json.loads(policy.inputs["policyDocument"]) == doc
    attachments = [r for r in engine.of_type("ram/rolePolicyAttachment:RolePolicyAttachment") if r.name.endswith("-kms")]
    assert len(attachments) == 1
