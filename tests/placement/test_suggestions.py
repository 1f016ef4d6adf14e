"""Suggestions when nothing is feasible: tested one-step changes that know precision, size and method."""

from __future__ import annotations

import re

import pytest

from trainstack.errors import InfeasibleError
from trainstack.placement import resolve
from trainstack.profile import parse_profile


def infeasible(doc):
    with pytest.raises(InfeasibleError) as err:
        resolve(parse_profile(doc))
    return err.value.suggestions


FP8 = {"name": "fp8", "region": "cn-beijing", "model": {"preset": "llama-3-8b"},
       "training": {"method": "full", "precision": "fp8-mixed", "gradient_checkpointing": True, "zero_stage": 3,
                    "tokens": 1e9},
       "resources": {"target": "ecs", "spot": "never"}}


def test_fp8_without_a_priced_fp8_type_points_at_the_price_book_and_bf16():
    s = infeasible(FP8)
    book = next(x for x in s if x.startswith("add the team's price for the FP8 types seen without a public price"))
    named = book.split(": ", 1)[1].split(", ")
    assert "ecs.gn8v-8x.48xlarge" in named and len(named) <= 4
    assert all("gn8v" in t or "ebmgn8v" in t for t in named)  # FP8 parts only (never the PCIe-only L20 boxes)
    bf16 = next(x for x in s if x.startswith("train in BF16 with fp32 master weights (training.precision: bf16-mixed)"))
    assert re.search(r": 1 x ecs\.\S+, [\d,]+ CNY$", bf16), bf16
    plan = resolve(parse_profile({**FP8, "training": {**FP8["training"], "precision": "bf16-mixed"}}))
    assert f"1 x {plan.instance_type}, {plan.total_cost_cny:,.0f} CNY" in bf16  # the plan it names is the real one


def test_more_nodes_suggests_the_smallest_max_nodes_that_works():
    doc = {"name": "big", "region": "cn-shenzhen", "model": {"preset": "llama-3-70b"},
           "training": {"method": "pretrain", "precision": "bf16-mixed", "gradient_checkpointing": True,
                        "zero_stage": 3, "tokens": 1e10},
           "resources": {"target": "ecs", "spot": "never", "max_nodes": 2, "deadline_hours": 200}}
    s = infeasible(doc)
    (more,) = [x for x in s if x.startswith("allow ")]
    n = int(re.match(r"allow (\d+) nodes \(resources\.max_nodes: (\d+)\)", more).group(1))
    plan = resolve(parse_profile({**doc, "resources": {**doc["resources"], "max_nodes": n}}))
    assert plan.nodes <= n and f"{plan.nodes} x {plan.instance_type}" in more
    with pytest.raises(InfeasibleError):
        resolve(parse_profile({**doc, "resources": {**doc["resources"], "max_nodes": n - 1}}))
    # pre-training is never told to train adapters
    assert not any("LoRA" in x or "QLoRA" in x for x in s)


def test_fine_tuning_still_gets_adapters_when_they_work():
    doc = {"name": "ft", "region": "cn-shenzhen", "model": {"preset": "llama-3-8b"},
           "training": {"method": "full", "precision": "bf16", "gradient_checkpointing": True, "sequence_length": 1024,
                        "tokens": 1e8},
           "resources": {"target": "ecs", "spot": "never", "gpus": 1, "gpu_models": ["A10"]}}
    s = infeasible(doc)
    assert any(x.startswith("train LoRA adapters instead of all weights (training.method: lora): 1 x ecs.gn7i")
               for x in s), s
