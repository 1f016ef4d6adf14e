"""The training profile: strict schema, clear errors, documented derived shapes."""

from __future__ import annotations

import json

import pytest
import yaml

from trainstack.architecture import derive_architecture, presets
from trainstack.cli import main
from trainstack.errors import InputError
from trainstack.profile import TrainingProfile, load_profile, parse_profile

BASE = {"name": "demo", "model": {"preset": "llama-3-8b"}}


def write(tmp_path, content, name="p.yaml"):
    f = tmp_path / name
    if isinstance(content, bytes):
        f.write_bytes(content)
    else:
        f.write_text(content if isinstance(content, str) else yaml.safe_dump(content))
    return f


def validate(capsys, path):
    code = main(["validate", str(path)])
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return code, out.err


@pytest.mark.parametrize("content, needle", [
    ("name: x\nmodel: {preset: [", "not valid YAML at line"),
    ("", "is empty"),
    ("   \n# only a comment\n", "is empty"),
    (b"\x00\x01\x02binary", "binary file"),
    (b"\xff\xfe not utf8", "not UTF-8"),
    ("- a\n- b\n", "must be a YAML mapping"),
    ("name: a\nname: b\nmodel: {preset: llama-3-8b}\n", "duplicate key 'name'"),
    ("!!python/object/apply:os.system ['true']", "not valid YAML"),
])
def test_unreadable_files_exit_2_with_a_clear_message(tmp_path, capsys, content, needle):
    code, err = validate(capsys, write(tmp_path, content))
    assert code == 2 and needle in err and "p.yaml" in err


def test_missing_file_and_directory(tmp_path, capsys):
    code, err = validate(capsys, tmp_path / "nope.yaml")
    assert code == 2 and "not found" in err
    code, err = validate(capsys, tmp_path)
    assert code == 2 and "is a directory" in err


def test_one_line_per_problem_with_path_given_allowed_and_did_you_mean(tmp_path, capsys):
    doc = {"name": "demo", "model": {"preset": "lama-3-8b"},
           "training": {"methd": "lora", "micro_batch_size": 0, "precision": "bf32"},
           "resources": {"spot": "sometimes"}}
    code, err = validate(capsys, write(tmp_path, doc))
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 5
    assert any("model.preset" in l and "'lama-3-8b'" in l and "did you mean 'llama-3-8b'" in l for l in lines)
    assert any("training.methd: unknown field" in l and "did you mean 'method'" in l for l in lines)
    assert any("training.micro_batch_size" in l and "given 0" in l and ">= 1" in l for l in lines)
    assert any("training.precision" in l and "'bf16'" in l for l in lines)
    assert any("resources.spot" in l and "'sometimes'" in l for l in lines)


def test_yaml_booleans_get_a_hint(tmp_path, capsys):
    code, err = validate(capsys, write(tmp_path, "name: x\nmodel: {preset: llama-3-8b}\nresources: {spot: no}\n"))
    assert code == 2 and "quote the word" in err


@pytest.mark.parametrize("doc, needle", [
    ({**BASE, "training": {"method": "full", "lora": {"rank": 8}}}, "lora block is only valid"),
    ({**BASE, "training": {"zero_stage": 2}, "resources": {"gpus": 1}}, "with gpus: 1 use zero_stage: 0"),
    ({**BASE, "model": {"preset": "llama-3-8b", "params_b": 8}}, "exactly one of"),
    ({**BASE, "model": {}}, "exactly one of"),
    ({**BASE, "name": "My_Job"}, "DNS-safe"),
    ({**BASE, "zone": "cn-beijing-a"}, "not in region"),
    ({**BASE, "access": {"ssh_cidrs": ["0.0.0.0/0"]}}, "whole internet"),
    ({**BASE, "access": {"ssh_cidrs": ["0.0.0.0/1", "128.0.0.0/1"]}}, "public addresses"),
    ({**BASE, "access": {"ssh_cidrs": ["1.0.0.0/8"]}}, "public addresses"),
    ({**BASE, "network": {"vpc_cidr": "8.8.0.0/16"}}, "private IPv4"),
    ({**BASE, "network": {"vpc_cidr": "10.0.0.0/16", "vswitch_cidr": "10.1.0.0/20"}}, "not inside"),
    ({**BASE, "resources": {"gpus": 0}}, "gpus"),
    ({**BASE, "tags": {"trainstack:role": "x"}}, "reserved prefix"),
    ({**BASE, "storage": {"dataset_uri": "s3://bucket"}}, "oss://"),
    ({**BASE, "image_provides": ["pytorch"]}, "set image_id to that image"),
    ({**BASE, "image_id": "m-x", "image_provides": ["pytorch", "pytorch"]}, "lists a part twice"),
    ({**BASE, "image_id": "m-x", "image_provides": ["cuda"]}, "'gpu-driver', 'erdma' or 'pytorch'"),
    ({**BASE, "image_id": "m-x", "image_provides": "pytorch"}, "image_provides"),
    ({**BASE, "image_id": "m-x", "image_provides": [True]}, "'gpu-driver', 'erdma' or 'pytorch'"),
    ({**BASE, "storage": {"dataset_sync": "at-boot", "dataset_gib": 10}}, "set storage.dataset_uri to an oss://"),
    ({**BASE, "storage": {"dataset_sync": "at-boot", "dataset_gib": 10, "dataset_uri": "cpfs://fs/x"}},
     "cpfs:// and nas:// are mounted, not copied"),
    ({**BASE, "storage": {"dataset_sync": "at-boot", "dataset_uri": "oss://team-data/x/"}}, "needs storage.dataset_gib"),
    ({**BASE, "storage": {"dataset_sync": "always", "dataset_gib": 10, "dataset_uri": "oss://team-data/x/"}},
     "'stream' or 'at-boot'"),
    ({**BASE, "resources": {"target": "dlc"}, "storage": {"dataset_sync": "at-boot", "dataset_gib": 10,
                                                          "dataset_uri": "oss://team-data/x/"}}, "mounts storage.dataset_uri"),
    ({**BASE, "dlc": {"workspace_id": "123"}, "storage": {"dataset_sync": "at-boot", "dataset_gib": 10,
                                                          "dataset_uri": "oss://team-data/x/"}}, "resources.target: ecs"),
])
def test_cross_field_rules(doc, needle):
    with pytest.raises(InputError) as err:
        parse_profile(doc, file="p.yaml")
    assert needle in "\n".join(err.value.lines())


def test_profile_is_frozen_and_defaults_are_safe():
    p = parse_profile(BASE)
    with pytest.raises(Exception):
        p.name = "other"  # type: ignore[misc]
    assert p.access.ssh_cidrs == () and p.network.internet_egress is False
    assert p.storage.retain_on_destroy is True and p.region == "cn-shenzhen"


def test_lora_method_without_block_gets_defaults():
    p = parse_profile({**BASE, "training": {"method": "qlora"}})
    assert p.training.adapters.rank == 16 and p.training.adapters.targets == "attention"


def test_preset_aliases_share_the_shape():
    # published counts per preset: tests/models/test_presets.py
    assert presets()["llama-3.1-8b"].architecture == presets()["llama-3-8b"].architecture


@pytest.mark.parametrize("billions", [0.5, 1, 7, 13, 70, 405])
def test_params_b_derives_a_documented_shape_close_to_the_size(billions):
    arch = derive_architecture(billions)
    assert abs(arch.params / (billions * 1e9) - 1) < 0.12
    assert arch.dim_head == 128 and arch.vocab_size == 128256 and not arch.tie_embeddings
    assert arch.num_attention_heads % arch.num_kv_heads == 0


def test_architecture_only_profile(tmp_path, capsys):
    arch = {"hidden_size": 1024, "num_layers": 8, "num_attention_heads": 16, "num_kv_heads": 4,
            "intermediate_size": 4096, "vocab_size": 32000}
    f = write(tmp_path, {"name": "custom", "model": {"architecture": arch}})
    assert main(["validate", str(f), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["valid"] and doc["profile"]["model"]["architecture"]["hidden_size"] == 1024


def test_sample_profiles_validate_and_schema_is_current(capsys):
    import pathlib
    root = pathlib.Path(__file__).resolve().parents[2]
    for f in (root / "stacks" / "profiles").glob("*.yaml"):
        assert f.read_text().startswith("# yaml-language-server: $schema=../../profile.schema.json")
        load_profile(f)
    assert main(["schema"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((root / "profile.schema.json").read_text()), "run `make schema`"
    assert set(printed["properties"]) == set(TrainingProfile.model_fields)


@pytest.mark.parametrize("content, needle", [
    ('"[": null\nname: a\nmodel: {preset: llama-3-8b}\n', "[: unknown field"),
    ("name: a\nmodel: {preset: llama-3-8b}\nstr: 1\n", "str: unknown field"),
    ("name: a\nmodel: {preset: llama-3-8b}\ntraining: {'lr[0]': 1}\n", "training.lr[0]: unknown field"),
])
def test_odd_key_names_are_reported_not_crashed_on(tmp_path, capsys, content, needle):
    # found by the fuzz test: keys that look like pydantic's union tags ('str', 'x[0]')
    code, err = validate(capsys, write(tmp_path, content))
    assert code == 2 and needle in err


def test_whole_profile_rules_do_not_dump_the_profile(tmp_path, capsys):
    code, err = validate(capsys, write(tmp_path, {**BASE, "training": {"zero_stage": 3}, "resources": {"gpus": 1}}))
    assert code == 2 and "use zero_stage: 0" in err and "given {" not in err


def test_validate_checks_names_against_the_catalog(tmp_path, capsys):
    doc = {**BASE, "region": "cn-shenzen",
           "resources": {"gpu_models": ["A100"], "instance_types": ["ecs.gn7i-c8g1.24xlarge"]}}
    code, err = validate(capsys, write(tmp_path, doc))
    lines = err.strip().splitlines()
    assert code == 2 and all("p.yaml" in l for l in lines[:3])
    assert "region" in lines[0] and "did you mean 'cn-shenzhen'" in lines[0]
    assert "resources.gpu_models[0]" in err and "resources.instance_types[0]" in err
    assert "'ecs.gn7i-c8g1.2xlarge'" in err


# ---- model.hf_config ------------------------------------------------------------------------

HF_DIR = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "hf_configs"


def test_hf_config_is_read_relative_to_the_profile_file(tmp_path, capsys, monkeypatch):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "config.json").write_text((HF_DIR / "qwen3-30b-a3b.json").read_text())
    f = write(tmp_path, {"name": "moe", "model": {"hf_config": "models/config.json"}})
    monkeypatch.chdir("/")
    profile = load_profile(f)
    assert profile.architecture.num_experts == 128 and profile.architecture.params > 30e9
    code, err = validate(capsys, f)
    assert code == 0


@pytest.mark.parametrize("config, needle", [
    ("missing.json", "config file not found"),
    ("bad.json", "num_shared_expert"),
])
def test_bad_hf_configs_exit_2_naming_the_field(tmp_path, capsys, config, needle):
    import json as _json
    doc = _json.loads((HF_DIR / "mixtral-8x7b.json").read_text())
    doc["num_shared_experts_per_layer"] = 2
    (tmp_path / "bad.json").write_text(_json.dumps(doc))
    code, err = validate(capsys, write(tmp_path, {"name": "x", "model": {"hf_config": config}}))
    assert code == 2 and "model.hf_config" in err and needle in err


def test_a_config_json_given_as_the_profile_says_what_to_do(tmp_path, capsys):
    f = tmp_path / "config.json"
    f.write_text((HF_DIR / "llama-3.1-8b.json").read_text())
    code, err = validate(capsys, f)
    assert code == 2 and "Hugging Face config.json, not a training profile" in err and "hf_config" in err


def test_presets_resolve_whatever_way_they_are_written(capsys, tmp_path):
    for given in ("Qwen/Qwen2.5-7B-Instruct", "QWEN2.5-7B", "qwen2.5-7b"):
        p = parse_profile({"name": "q", "model": {"preset": given}})
        assert p.architecture == parse_profile({"name": "q", "model": {"preset": "qwen2.5-7b"}}).architecture
        assert p.model.label == "qwen2.5-7b"


def test_architecture_takes_hugging_face_key_names_and_moe_fields():
    arch = {"hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16, "num_key_value_heads": 4,
            "intermediate_size": 4096, "vocab_size": 32000, "tie_word_embeddings": True,
            "num_local_experts": 8, "num_experts_per_tok": 2}
    p = parse_profile({"name": "m", "model": {"architecture": arch}})
    assert p.architecture.num_layers == 8 and p.architecture.num_experts == 8 and p.architecture.tie_embeddings


@pytest.mark.parametrize("training, resources, needle", [
    ({"expert_parallel": 2}, {}, "needs a Mixture-of-Experts model"),
    ({"gradient_accumulation_steps": 4, "global_batch_size": 64}, {}, "not both"),
    ({"gradient_accumulation_steps": 4, "global_batch_size": 64, "micro_batch_size": 2}, {"gpus": 4}, "give one"),
    ({"global_batch_size": 6, "micro_batch_size": 4}, {}, "multiple of micro_batch_size"),
    ({"global_batch_size": 12, "micro_batch_size": 2}, {"gpus": 4}, "whole number of micro-batches"),
])
def test_batch_and_expert_settings_are_checked(training, resources, needle):
    with pytest.raises(InputError) as err:
        parse_profile({**BASE, "training": training, "resources": resources})
    assert needle in "\n".join(p.message for p in err.value.problems)


def test_consistent_batch_settings_and_expert_parallel_on_moe_validate():
    p = parse_profile({"name": "m", "model": {"preset": "mixtral-8x7b"},
                       "training": {"micro_batch_size": 2, "gradient_accumulation_steps": 4, "global_batch_size": 64,
                                    "expert_parallel": 8, "zero_stage": 3}, "resources": {"gpus": 8}})
    assert p.training.accumulation_steps(8) == 4 and p.training.global_batch(8) == 64
    q = parse_profile({**BASE, "training": {"micro_batch_size": 2, "global_batch_size": 64}})
    assert q.training.accumulation_steps(8) == 4 and q.training.accumulation_steps(1) == 32
    with pytest.raises(InputError) as err:
        parse_profile({"name": "m", "model": {"preset": "mixtral-8x7b"}, "training": {"expert_parallel": 3}})
    assert "must divide the model's 8 experts" in err.value.problems[0].message


def test_a_prepared_image_is_declared_with_what_it_holds():
    p = parse_profile({**BASE, "image_id": "m-x", "image_provides": ["gpu-driver", "pytorch"]}, file="p.yaml")
    assert p.image_provides == ("gpu-driver", "pytorch")
