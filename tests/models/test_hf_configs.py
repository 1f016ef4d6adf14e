"""Real config.json files (tests/data/hf_configs/, sources in SOURCES.md) read into shapes."""

from __future__ import annotations

import json
import pathlib

import pytest

from trainstack.models import Architecture, HfConfigError, architecture_from_hf, load_hf_config

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "data" / "hf_configs"


def load(name: str) -> dict:
    return json.loads((CONFIGS / name).read_text())


# The list: published totals within 1 %, active within 3 % (MoE).
@pytest.mark.parametrize("config, total, active", [
    ("mixtral-8x7b.json", 46.7e9, 12.9e9),      # Mistral: 46.7B total, 12.9B per token
    ("qwen3-30b-a3b.json", 30.5e9, 3.3e9),      # Qwen3 card: 30.5B in total and 3.3B activated
    ("qwen3-8b.json", 8.2e9, None),             # Qwen3 card: 8.2B
    ("gemma-2-9b.json", 9.24e9, None),          # model page: 9.24B
    ("llama-3.1-8b.json", 8.03e9, None),        # model page: 8.03B
    ("phi-3-mini-4k-instruct.json", 3.8e9, None),  # Phi-3 report: 3.8 billion
])
def test_real_configs_give_their_published_counts(config, total, active):
    arch = load_hf_config(CONFIGS / config)
    assert arch.params == pytest.approx(total, rel=0.01)
    assert arch.active_params == pytest.approx(active or total, rel=0.03)


def test_every_shipped_config_reads_and_is_listed_in_the_sources_file():
    sources = (CONFIGS / "SOURCES.md").read_text()
    for path in sorted(CONFIGS.glob("*.json")):
        assert load_hf_config(path).params > 0
        assert path.name in sources or path.stem.split("-")[0] in sources, path.name


def test_mixtral_keeps_every_expert_and_routes_two():
    arch = load_hf_config(CONFIGS / "mixtral-8x7b.json")
    assert (arch.num_experts, arch.num_experts_per_token, arch.moe_layers) == (8, 2, 32)
    assert arch.expert_width == 14336  # Mixtral's intermediate_size is the expert width
    assert arch.expert_total_params == 32 * 8 * 3 * 4096 * 14336


def test_qwen2_moe_counts_the_shared_expert_and_its_gate():
    arch = load_hf_config(CONFIGS / "qwen1.5-moe-a2.7b.json")
    assert arch.num_shared_experts == 1 and arch.shared_width == 5632 and arch.shared_expert_gate
    assert arch.attention_bias  # qkv_bias defaults to true (Qwen2MoeConfig)
    assert arch.params == pytest.approx(14.3e9, rel=0.01) and arch.active_params == pytest.approx(2.7e9, rel=0.03)


def test_dense_layer_rules_follow_transformers():
    doc = {**load("qwen3-30b-a3b.json"), "mlp_only_layers": [0, 1], "decoder_sparse_step": 2}
    arch = architecture_from_hf(doc)
    # MoE where (i + 1) % 2 == 0 and i not in [0, 1]: layers 3, 5, ..., 47
    assert arch.moe_layers == 23 and arch.dense_mlp_layers == 25
    assert [i for i in range(48) if arch.is_moe_layer(i)][:2] == [3, 5]


def test_gpt_oss_counts_biases_sinks_and_its_router():
    arch = load_hf_config(CONFIGS / "gpt-oss-20b.json")
    assert arch.attention_sinks and arch.expert_bias and arch.router_bias and arch.attention_output_bias
    # the gpt-oss model card counts active parameters without the input embedding: 3.6B
    assert arch.active_params - arch.embedding_params == pytest.approx(3.6e9, rel=0.03)
    assert arch.params == pytest.approx(20.9e9, rel=0.01)


def test_vision_language_configs_count_the_vision_tower():
    gemma = load_hf_config(CONFIGS / "gemma-3-4b-it.json")
    assert gemma.vision is not None and gemma.vision.tokens_per_image == 256
    assert gemma.vocab_size == 262208 and gemma.num_attention_heads == 8  # Gemma3TextConfig defaults
    assert gemma.params == pytest.approx(4.3e9, rel=0.01) and gemma.vision.params == pytest.approx(0.42e9, rel=0.02)
    llava = load_hf_config(CONFIGS / "llava-1.5-7b.json")
    assert llava.hidden_size == 4096 and llava.num_layers == 32  # LlamaConfig defaults under text_config
    assert llava.params == pytest.approx(7.06e9, rel=0.01) and llava.vision.tokens_per_image == 576


@pytest.mark.parametrize("change, key", [
    ({"model_type": "bert"}, "model_type"),
    ({"model_type": "deepseek_v3"}, "model_type"),
    ({"q_lora_rank": 1536}, "q_lora_rank"),
    ({"n_shared_experts": 2}, "n_shared_experts"),
    ({"moe_layer_freq": 2}, "moe_layer_freq"),
    ({"num_experts_per_tok": 16}, "num_experts_per_token"),
    ({"num_hidden_layers": "many"}, "num_hidden_layers"),  # the config key, with its JSON type
])
def test_what_is_not_understood_is_an_error_naming_the_field(change, key):
    doc = {**load("mixtral-8x7b.json"), **change}
    with pytest.raises(HfConfigError) as err:
        architecture_from_hf(doc)
    assert key in err.value.key or key in str(err.value)


def test_nested_errors_name_the_nested_path():
    doc = load("gemma-3-4b-it.json")
    doc["text_config"] = {**doc["text_config"], "altup_num_inputs": 4}
    with pytest.raises(HfConfigError) as err:
        architecture_from_hf(doc)
    assert err.value.key == "text_config.altup_num_inputs"
    doc = load("gemma-3-4b-it.json")
    doc["vision_config"] = {**doc["vision_config"], "model_type": "dinov2"}
    with pytest.raises(HfConfigError) as err:
        architecture_from_hf(doc)
    assert err.value.key == "vision_config.model_type"


def test_keys_that_never_change_the_shape_are_ignored():
    doc = {**load("llama-3.1-8b.json"), "rope_scaling": {"rope_type": "yarn"}, "torch_dtype": "float32",
           "quantization_config": {"quant_method": "bitsandbytes"}, "some_flag": True}
    assert architecture_from_hf(doc) == load_hf_config(CONFIGS / "llama-3.1-8b.json")


def test_unreadable_files_are_clear_errors(tmp_path):
    for content, needle in [(b"{not json", "not valid JSON"), (b"\xff\xfe", "not UTF-8"), (b"[1, 2]", "JSON object"),
                            (b" " * ((1 << 20) + 1), "too large")]:
        f = tmp_path / "c.json"
        f.write_bytes(content)
        with pytest.raises(HfConfigError, match=needle):
            load_hf_config(f)
    with pytest.raises(HfConfigError, match="file not found"):
        load_hf_config(tmp_path / "missing.json")


def test_architecture_accepts_hugging_face_key_names():
    hf = Architecture.model_validate({"hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 16,
                                      "num_key_value_heads": 4, "intermediate_size": 4096, "vocab_size": 32000,
                                      "tie_word_embeddings": True, "num_local_experts": 8,
                                      "num_experts_per_tok": 2, "moe_intermediate_size": 1024})
    ours = Architecture(hidden_size=1024, num_layers=8, num_attention_heads=16, num_kv_heads=4,
                        intermediate_size=4096, vocab_size=32000, tie_embeddings=True, num_experts=8,
                        num_experts_per_token=2, expert_intermediate_size=1024)
    assert hf == ours
    with pytest.raises(ValueError, match="name the same field"):
        Architecture.model_validate({**ours.model_dump(), "num_hidden_layers": 8})
