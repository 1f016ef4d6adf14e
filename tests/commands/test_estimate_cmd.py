"""`trainstack estimate`: the JSON contract, fits, hours and cost, suggestions, user mistakes."""

from __future__ import annotations

import json
import textwrap

import pytest

from trainstack import cli

LORA_8B = """
name: lora-8b
model: {preset: llama-3-8b}
training:
  method: lora
  precision: bf16
  micro_batch_size: 1
  sequence_length: 1024
  gradient_checkpointing: true
  lora: {rank: 16, targets: attention}
  tokens: 5.0e7
"""

ARCH_ONLY = """
name: custom
model:
  architecture: {hidden_size: 2048, num_layers: 16, num_attention_heads: 32, num_kv_heads: 8,
                 intermediate_size: 8192, vocab_size: 128256, tie_embeddings: true}
training: {precision: bf16-mixed, micro_batch_size: 8, sequence_length: 1024}
"""

HUGE = """
name: huge
model: {preset: llama-3-70b}
training: {precision: bf16-mixed, micro_batch_size: 1, sequence_length: 8192}
"""


def write(tmp_path, text: str):
    p = tmp_path / "profile.yaml"
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return str(p)


def run(capsys, *argv):
    rc = cli.main(["estimate", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def run_json(capsys, *argv):
    rc, out, err = run(capsys, *argv, "--json")
    assert rc == 0, err
    return json.loads(out)


def test_json_contract_with_one_gpu(tmp_path, capsys):
    doc = run_json(capsys, write(tmp_path, LORA_8B), "--gpu", "A10")
    mem = doc["memory"]
    for key in ("peak_gib_per_gpu", "required_gib_per_gpu", "breakdown_gib", "fits"):
        assert key in mem
    assert mem["required_gib_per_gpu"] > mem["peak_gib_per_gpu"] > 0
    assert sum(mem["breakdown_gib"].values()) == pytest.approx(mem["peak_gib_per_gpu"], abs=0.01)
    (fit,) = mem["fits"]  # PyTorch's A10 total [TORCH-A10]; the minimum margin is 3% of it
    lo, hi = mem["required_gib_interval"]
    verdict = ("fits" if hi + fit["min_margin_gib"] <= 21.99 else "at_risk"
               if mem["required_gib_per_gpu"] + fit["min_margin_gib"] <= 21.99 else "does_not_fit")
    assert fit == {"gpu": "A10", "usable_gib": 21.99, "fits": fit["margin_gib"] >= fit["min_margin_gib"],
                   "min_margin_gib": round(0.03 * 21.99, 2), "margin_gib": round(21.99 - mem["required_gib_per_gpu"], 2),
                   "fit": verdict, "peak_gib_interval": mem["peak_gib_interval"]}
    assert doc["throughput"]["gpu"] == "A10" and doc["throughput"]["tokens_per_second_per_gpu"] > 0
    # issue 32: the 80 % intervals and the class they come from
    low, high = doc["throughput"]["tokens_per_second_per_gpu_interval"]
    assert 0 < low <= high and doc["throughput"]["interval_class"] == "ampere/hf/lora/dense"
    assert mem["interval_class"] == "*/hf/lora/dense" and lo <= mem["required_gib_per_gpu"] * 1.5
    assert doc["training"]["attention"] == "sdpa" and doc["per_gpu"][0]["fit"] == verdict
    # tokens are set: hours and cost come with them
    assert doc["hours"] == pytest.approx(5e7 / doc["throughput"]["tokens_per_second"] / 3600, rel=1e-3)
    cost = doc["cost"]
    assert cost["on_demand_cny"] == pytest.approx(cost["on_demand_cny_per_gpu_hour"] * doc["hours"], rel=1e-3)
    assert cost["spot_cny"] < cost["on_demand_cny"]
    assert any("spot price" in a and "estimate" in a for a in doc["assumptions"])


def test_gpu_names_are_case_insensitive_and_typos_get_did_you_mean(tmp_path, capsys):
    path = write(tmp_path, LORA_8B)
    assert run_json(capsys, path, "--gpu", "h200")["memory"]["fits"][0]["gpu"] == "H200"
    rc, _, err = run(capsys, path, "--gpu", "A1OO-80G")
    assert rc == 2 and "did you mean" in err and "A100-80G" in err


def test_without_gpu_every_catalog_gpu_is_listed(tmp_path, capsys):
    doc = run_json(capsys, write(tmp_path, LORA_8B))
    fits = doc["memory"]["fits"]
    assert len(fits) > 5 and {"A10", "H200", "A100-80G"} <= {f["gpu"] for f in fits}
    assert all(set(f) == {"gpu", "usable_gib", "fits", "margin_gib", "min_margin_gib", "fit", "peak_gib_interval"}
               for f in fits)
    assert len(doc["per_gpu"]) == len(fits)


def test_a_profile_given_only_by_architecture_works_and_has_no_hours_without_tokens(tmp_path, capsys):
    doc = run_json(capsys, write(tmp_path, ARCH_ONLY), "--gpu", "H200")
    assert doc["params"] == 1_235_814_400
    assert doc["memory"]["peak_gib_per_gpu"] == pytest.approx(46.3, rel=0.05)  # the calibrated 1B case
    assert "hours" not in doc and "cost" not in doc


def test_a_job_that_fits_nowhere_exits_0_and_says_what_would_fit(tmp_path, capsys):
    path = write(tmp_path, HUGE)
    doc = run_json(capsys, path)
    assert all(not f["fits"] for f in doc["memory"]["fits"])
    assert doc["fits_any_gpu"] is False
    text = "\n".join(doc["suggestions"])
    assert "ZeRO-3 over" in text and "LoRA" in text
    rc, out, _ = run(capsys, path)
    assert rc == 0 and "Fits no listed GPU model" in out and "ZeRO-3 over" in out


def test_gpus_shard_zero_and_bad_counts_are_input_errors(tmp_path, capsys):
    path = write(tmp_path, HUGE.replace("sequence_length: 8192}", "sequence_length: 8192, zero_stage: 3}"))
    one = run_json(capsys, path, "--gpu", "H200", "--gpus", "8")
    many = run_json(capsys, path, "--gpu", "H200", "--gpus", "64")
    assert many["memory"]["peak_gib_per_gpu"] < one["memory"]["peak_gib_per_gpu"]
    assert many["gpus"] == 64 and many["throughput"]["gpus"] == 64
    assert any("ZeRO-3" in a for a in many["assumptions"])
    rc, _, err = run(capsys, path, "--gpus", "0")
    assert rc == 2 and "--gpus" in err


def test_text_output_shows_the_breakdown_and_the_fit_table(tmp_path, capsys):
    rc, out, _ = run(capsys, write(tmp_path, LORA_8B))
    assert rc == 0
    for words in ("COMPONENT", "weights", "logits and loss", "peak of allocated tensors", "required",
                  "USABLE GiB", "FITS", "TOKENS/S/GPU", "A10", "CNY SPOT (EST.)"):
        assert words in out


def test_a_missing_profile_is_exit_2(tmp_path, capsys):
    rc, _, err = run(capsys, str(tmp_path / "nope.yaml"))
    assert rc == 2 and "not found" in err


def test_fit_table_marks_gpus_without_the_precision(tmp_path, capsys):
    import json as _json

    from trainstack.cli import main as _main

    f = tmp_path / "p.yaml"
    f.write_text(_json.dumps({"name": "p", "model": {"preset": "llama-3-8b"},
                              "training": {"method": "lora", "precision": "bf16", "gradient_checkpointing": True,
                                           "sequence_length": 1024, "tokens": 5e7}}))
    assert _main(["estimate", str(f), "--json"]) == 0
    doc = _json.loads(capsys.readouterr().out)
    by_gpu = {g["gpu"]: g for g in doc["per_gpu"]}
    assert by_gpu["V100-32G"]["fits"] and not by_gpu["V100-32G"]["precision_supported"]
    # the cheapest plan is a GPU with BF16, never the V100 that fits without it (the A10 misses by
    # 0.05 GiB at PyTorch's 21.99 GiB device total)
    cheapest = by_gpu[doc["cheapest"]["gpu"]]
    assert by_gpu["A10"]["precision_supported"] and cheapest["fits"] and cheapest["precision_supported"]


def test_json_reports_total_and_active_parameters_and_the_text_says_both(tmp_path, capsys):
    import pathlib
    cfg = pathlib.Path(__file__).resolve().parents[1] / "data" / "hf_configs" / "mixtral-8x7b.json"
    (tmp_path / "config.json").write_text(cfg.read_text())
    f = write(tmp_path, "name: mix\nmodel: {hf_config: config.json}\n"
                        "training: {method: lora, precision: bf16, gradient_accumulation_steps: 4}\n")
    assert cli.main(["estimate", str(f), "--gpu", "H20", "--gpus", "8", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"]["parameters"] == pytest.approx(46.7e9, rel=0.01)
    assert doc["model"]["active_parameters"] == pytest.approx(12.9e9, rel=0.03)
    assert doc["model"]["moe"]["experts"] == 8 and doc["model"]["moe"]["experts_per_token"] == 2
    assert doc["training"]["gradient_accumulation_steps"] == 4
    assert doc["training"]["tokens_per_step"] == 4 * 8 * 2048 == doc["throughput"]["tokens_per_step"]
    assert doc["throughput"]["mfu"] <= doc["throughput"]["hfu"]
    assert cli.main(["estimate", str(f), "--gpu", "H20", "--gpus", "8"]) == 0
    text = capsys.readouterr().out
    assert "46.70B params, 12.88B active per token (2 of 8 experts)" in text
    assert "65,536 tokens per step" in text


def test_dense_models_report_active_equal_to_total(tmp_path, capsys):
    f = write(tmp_path, LORA_8B)
    assert cli.main(["estimate", str(f), "--gpu", "H20", "--json"]) == 0
    m = json.loads(capsys.readouterr().out)["model"]
    assert m["parameters"] == m["active_parameters"] == 8030261248 and m["moe"] is None and m["name"] == "llama-3-8b"
