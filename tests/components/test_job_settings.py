"""What `pulumi up` writes under job/ (components/job_settings.py): the job settings, and the node
programs at content-addressed keys with their manifest. A program object's name carries its digest,
so a new trainstack adds objects and retains the old ones (never replaced, never overwritten); the
settings name the set, and every node is created after all of it exists."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from plan_factory import multi_node_erdma_plan, single_gpu_lora_plan, spot_pool_plan

from trainstack.bootstrap.programs import MANIFEST, PROGRAMS, program_set, program_text

OBJECT = "oss/bucketObject:BucketObject"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def env_value(text: str, name: str) -> str:
    (line,) = [ln for ln in text.splitlines() if ln.startswith(f"{name}=")]
    return line.split("=", 1)[1].strip("'")


@pytest.mark.parametrize("make", [single_gpu_lora_plan, lambda: multi_node_erdma_plan(nodes=3)],
                         ids=["oss-checkpoints", "cpfs-checkpoints"])
def test_each_program_is_an_object_at_its_content_address_retained_and_private(engine, make):
    engine.declare(make())
    programs = [o for o in engine.of_type(OBJECT) if o.inputs["key"].startswith("job/programs/")]
    assert len(programs) == len(PROGRAMS) + 1
    (component,) = engine.of_type("trainstack:index:JobSettings")
    for obj in programs:
        _, _, digest, name = obj.inputs["key"].split("/")
        assert sha(obj.inputs["content"]) == digest and obj.name.endswith(digest[:16])
        assert obj.inputs["content"] == (program_set().manifest if name == MANIFEST else program_text(name))
        assert obj.inputs["acl"] == "private" and obj.parent == component.urn
        assert obj.retain_on_delete and not obj.protect, "kept for nodes that name an older set; code, not data"
    (manifest,) = [o for o in programs if o.inputs["key"].endswith(f"/{MANIFEST}")]
    listed = json.loads(manifest.inputs["content"])["programs"]
    keys = [o.inputs["key"].split("/") for o in programs if o is not manifest]
    assert listed == {name: digest for _, _, digest, name in keys}


def test_the_settings_and_the_user_data_name_the_set_and_nodes_come_after_it(engine):
    engine.declare(multi_node_erdma_plan(nodes=3))
    objects = engine.of_type(OBJECT)
    (settings,) = [o for o in objects if o.inputs["key"] == "job/settings.json"]
    programs = {o.urn for o in objects if o is not settings}
    assert programs <= set(settings.dependencies), "the settings are written after every program they name"
    shared = json.loads(settings.inputs["content"])["shared"]["settings.env"]
    assert env_value(shared, "PROGRAMS_SHA256") == program_set().digest
    for node in engine.of_type("ecs/instance:Instance"):
        assert settings.urn in node.dependencies
        user_data = base64.b64decode(node.inputs["userData"]).decode()
        assert f"BOOT_PROGRAMS_SHA256={program_set().digest}" in user_data


def test_a_pool_nodes_configuration_comes_after_the_programs_too(engine):
    engine.declare(spot_pool_plan())
    (settings,) = [o for o in engine.of_type(OBJECT) if o.inputs["key"] == "job/settings.json"]
    (config,) = engine.of_type("kind:ess-scaling-configuration")  # components/ess_pool.py (issue 33)
    assert settings.urn in config.dependencies
    assert f"BOOT_PROGRAMS_SHA256={program_set().digest}" in base64.b64decode(config.inputs["userData"]).decode()
