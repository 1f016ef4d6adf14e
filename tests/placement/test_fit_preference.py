"""The resolver prefers candidates whose memory fits with the estimate's interval (issue 32): an at_risk
candidate is ranked after every fits one whatever its price, chosen only when nothing fits, and the plan
then says so with the figures."""

from __future__ import annotations

from trainstack import sizing
from trainstack.catalog import load_catalog
from trainstack.placement.engine import ranked
from trainstack.plan import Candidate
from trainstack.profile import parse_profile
from trainstack.rules import planned

CATALOG = load_catalog()


def cand(name: str, objective: float, fit: str) -> Candidate:
    return Candidate(instance_type=name, nodes=1, gpus_per_node=1, objective=objective, fit=fit,
                     total_cost_cny=objective, estimated_hours=1.0)


def test_a_cheaper_at_risk_candidate_ranks_after_every_one_that_fits():
    order = ranked([cand("risky-cheap", 1.0, "at_risk"), cand("safe", 5.0, "fits"), cand("safer", 9.0, "fits")],
                   "cost")
    assert [c.instance_type for c in order] == ["safe", "safer", "risky-cheap"]
    # among at_risk ones (nothing fits) the objective decides again
    order = ranked([cand("b", 2.0, "at_risk"), cand("a", 1.0, "at_risk")], "cost")
    assert [c.instance_type for c in order] == ["a", "b"]


def _profile(seq: int):
    return parse_profile({
        "name": "risk", "region": "cn-shenzhen", "model": {"preset": "llama-3-8b"},
        "training": {"method": "lora", "precision": "bf16", "micro_batch_size": 1, "sequence_length": seq,
                     "gradient_checkpointing": True, "tokens": 1e7},
        "resources": {"gpu_models": ["A10"], "gpus": 1, "spot": "never", "deadline_hours": None,
                      "max_hourly_cost": None}})


def _at_risk_sequence() -> int:
    """A sequence length at which an 8B LoRA needs less than an A10 holds, but its interval's upper end more."""
    a10 = CATALOG.gpu("A10")
    least = sizing.min_margin_gib(a10.usable_gib, 0.03)
    for seq in range(1024, 16384, 128):
        p = _profile(seq)
        if sizing.memory_fit(sizing.memory_estimate(p.architecture, p.training), a10.usable_gib, least) == "at_risk":
            return seq
    raise AssertionError("no sequence length puts an 8B LoRA at risk on an A10")


def test_an_at_risk_plan_is_chosen_only_when_nothing_fits_and_says_so_with_the_figures():
    seq = _at_risk_sequence()
    plan = planned(_profile(seq), CATALOG)
    assert plan.estimate.fit == "at_risk" and plan.gpu_model == "A10"
    lo, hi = plan.estimate.required_gib_interval
    assert plan.estimate.required_gib_per_gpu <= hi
    first = plan.labels[0]
    assert first.startswith("memory at risk on A10") and f"{plan.estimate.required_gib_per_gpu:.1f} GiB" in first
    assert f"{hi:.1f} GiB" in first and "No candidate fits" in first
    # a shorter sequence fits with its interval: no such label
    safe = planned(_profile(1024), CATALOG)
    assert safe.estimate.fit == "fits" and not any(lab.startswith("memory at risk") for lab in safe.labels)
