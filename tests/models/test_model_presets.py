"""Presets: exact shapes that reproduce their publishers' parameter counts; names as users write them."""

from __future__ import annotations

import math
import pathlib

import pytest

from trainstack.models import find_preset, load_hf_config, normalize, preset_names, presets

CONFIGS = pathlib.Path(__file__).resolve().parents[1] / "data" / "hf_configs"
PRESETS = {p.name: p for p in presets().values()}


def _tolerance(published: float, rel: float) -> float:
    """The bound: ``rel`` of the figure, or half a unit of its last published digit when the
    publisher rounds harder than that ("1.7B" states the count to +-0.05B)."""
    digits = f"{published / 1e9:.4g}"
    decimals = len(digits.split(".")[1]) if "." in digits else 0
    return max(rel * published, 0.5 * 10 ** -decimals * 1e9)


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_each_preset_reproduces_its_published_total_within_1_percent(name):
    p = PRESETS[name]
    assert abs(p.architecture.params - p.published.total) <= _tolerance(p.published.total, 0.01)
    assert p.published.source.startswith("http") and p.published.quote
    assert p.source.startswith("https://huggingface.co/") and "read from" in p.source


@pytest.mark.parametrize("name", sorted(n for n, p in PRESETS.items() if p.published.active))
def test_each_moe_preset_reproduces_its_published_active_count_within_3_percent(name):
    p = PRESETS[name]
    a = p.architecture
    active = a.active_params - (a.embedding_params if p.published.active_excludes_embedding else 0)
    assert abs(active - p.published.active) <= _tolerance(p.published.active, 0.03)
    assert a.is_moe and a.active_params < a.params


def test_dense_presets_have_active_equal_to_total():
    for p in PRESETS.values():
        if not p.architecture.is_moe:
            assert p.architecture.active_params == p.architecture.params, p.name


def test_the_issue_list_of_current_models_is_covered():
    wanted = ["qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b", "qwen3-14b", "qwen3-32b", "qwen3-30b-a3b",
              "qwen3-235b-a22b", "llama-3.1-8b", "llama-3.3-70b", "gemma-2-9b", "gemma-2-27b", "gemma-3-1b",
              "gemma-3-4b", "mistral-nemo", "mixtral-8x7b", "mixtral-8x22b", "phi-3-mini", "phi-4-mini",
              "gpt-oss-20b", "gpt-oss-120b"]
    assert [n for n in wanted if find_preset(n) is None] == []


@pytest.mark.parametrize("given", ["qwen2.5-7b", "QWEN2.5-7B", "Qwen/Qwen2.5-7B-Instruct", "qwen2.5-7b-instruct",
                                   "Qwen2.5-7B-Chat", "qwen2.5-7b-base", " Qwen2.5_7B "])
def test_names_are_case_insensitive_and_accept_hf_ids_and_variants(given):
    assert find_preset(given).name == "qwen2.5-7b"


@pytest.mark.parametrize("given, name", [
    ("meta-llama/Meta-Llama-3.1-8B-Instruct", "llama-3-8b"), ("meta-llama/Llama-3.3-70B-Instruct", "llama-3-70b"),
    ("google/gemma-3-4b-it", "gemma-3-4b"), ("mistralai/Mistral-Nemo-Instruct-2407", "mistral-nemo-12b"),
    ("Qwen/Qwen3-30B-A3B-Instruct-2507", "qwen3-30b-a3b"), ("mistralai/Mistral-7B-Instruct-v0.3", "mistral-7b"),
    ("microsoft/Phi-3.5-mini-instruct", "phi-3-mini"), ("openai/gpt-oss-120b", "gpt-oss-120b"),
    ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mixtral-8x7b"), ("llava-hf/llava-1.5-7b-hf", "llava-1.5-7b"),
])
def test_hugging_face_repository_ids_resolve(given, name):
    assert find_preset(given).name == name


def test_different_shapes_never_share_a_name():
    assert find_preset("mistral-7b-v0.1") is None  # 32,000-token vocabulary: not v0.3's shape
    assert find_preset("qwen3-8") is None and find_preset("llama") is None
    keys = [normalize(k) for k in presets()]
    owners: dict[str, str] = {}
    for key, p in zip(keys, presets().values()):
        assert owners.setdefault(key, p.name) == p.name


@pytest.mark.parametrize("config, name", [
    ("mixtral-8x7b.json", "mixtral-8x7b"), ("mixtral-8x22b.json", "mixtral-8x22b"),
    ("qwen3-30b-a3b.json", "qwen3-30b-a3b"), ("qwen3-8b.json", "qwen3-8b"), ("gemma-2-9b.json", "gemma-2-9b"),
    ("llama-3.1-8b.json", "llama-3-8b"), ("phi-3-mini-4k-instruct.json", "phi-3-mini"),
    ("gpt-oss-20b.json", "gpt-oss-20b"), ("gemma-3-4b-it.json", "gemma-3-4b"), ("llava-1.5-7b.json", "llava-1.5-7b"),
    ("mistral-nemo-base-2407.json", "mistral-nemo-12b"), ("qwen1.5-moe-a2.7b.json", "qwen1.5-moe-a2.7b"),
])
def test_a_preset_is_exactly_the_shape_its_config_file_describes(config, name):
    assert load_hf_config(CONFIGS / config) == find_preset(name).architecture


def test_preset_list_is_sorted_and_complete():
    names = preset_names()
    assert names == sorted(names) and len(names) == len(PRESETS) >= 30
    assert not math.isnan(sum(PRESETS[n].published.total for n in names))
