"""The program reads its stack config through the one pipeline (trainstack.stack_config.stack_inputs)
that validate and the offline plan use: the same keys, the same refusals."""

from __future__ import annotations

import pulumi
import pytest

from components import program
from plan_factory import single_gpu_lora_plan
from trainstack.errors import InputError
from trainstack.stack_config import stack_inputs


def _run(engine, config: dict):
    pulumi.runtime.set_all_config(config)
    return engine.run(lambda: program.run_program(plan_loader=lambda profile: single_gpu_lora_plan()))


def test_the_program_reads_its_config_through_stack_inputs(engine, monkeypatch):
    seen = []

    def spy(config, project, root, secret_keys=()):
        seen.append((dict(config), project))
        return stack_inputs(config, project, root, secret_keys)

    monkeypatch.setattr(program, "stack_inputs", spy)
    _run(engine, {"trainstack:profile": "profiles/llama3-8b-lora.yaml", "trainstack:storageGeneration": "3",
                  "trainstack:policyConfig": "policy-config.example.json"})
    ((config, project),) = seen
    assert project == "trainstack" and config["trainstack:storageGeneration"] == "3"
    assert {f"trainstack:{k}" for k in program.PROGRAM_KEYS} <= set(config)


@pytest.mark.parametrize("key, value, text", [
    ("trainstack:policyConfig", "../secrets.json", "outside stacks/"),
    ("trainstack:storageGeneration", "0", "storageGeneration"),
    ("trainstack:autoReleaseAt", "2020-01-01T00:00:00Z", "in the past"),
])
def test_the_program_refuses_what_the_pipeline_refuses(engine, key, value, text):
    with pytest.raises(InputError, match=text):
        _run(engine, {"trainstack:profile": "profiles/llama3-8b-lora.yaml", key: value})
