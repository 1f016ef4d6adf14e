"""One rule book, one verdict: `validate` and `plan` agree on every profile of a stored corpus and on
generated ones, under no policy config and under the example config (stacks/policy-config.example.json).

Whatever `plan` rejects as bad input (exit 2), `validate` rejects with the same problems (field path and
message); `plan` never exits 4 (a mandatory policy) after `validate` exited 0, and when both plan the
profile their policy verdicts are the same list (policy, level, resource, message). The corpus: the
sample stacks' profiles, the preview fixtures, the shell-payload profiles of the attack
(tests/bootstrap/injection) and the rule-book profiles (tests/data/rule_book: one plan-level rule each,
and issue 30's two cases); generated: hypothesis profiles over method, GPUs, nodes, spot, self-healing,
checkpoint backend, DLC settings, price books and budgets (a small, derandomized number of examples).
"""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import tempfile
from typing import Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainstack.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
RULE_BOOK = ROOT / "tests" / "data" / "rule_book"
CORPUS = sorted([*ROOT.glob("stacks/profiles/*.yaml"), *ROOT.glob("tests/preview/fixtures/*.yaml"),
                 *ROOT.glob("tests/bootstrap/injection/*.yaml"), *RULE_BOOK.glob("*.yaml")])
PLAN_LEVEL = sorted(p for p in RULE_BOOK.glob("*.yaml") if not p.name.startswith("issue30_"))
EXAMPLE_CONFIG = ROOT / "stacks" / "policy-config.example.json"
CONFIGS = {"no-config": None, "example-config": EXAMPLE_CONFIG}


def _run(argv: list[str]) -> tuple[int, set, list]:
    """(exit code, exit-2 problems as (path, message), verdicts as (policy, level, resource, message))."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    text = out.getvalue()
    doc = json.loads(text) if text.strip() else {}
    problems: set = set()
    if rc == 2:
        problems = {(p["path"], p["message"]) for p in doc.get("problems", [])} or {("", doc["error"])}
    verdicts = sorted((v["policy"], v["level"], v["resource"], v["message"]) for v in doc.get("policy") or [])
    assert "Traceback" not in err.getvalue()
    return rc, problems, verdicts


def agree(profile: str, config: Optional[pathlib.Path]) -> tuple[int, int]:
    flag = ["--policy-config", str(config)] if config else []
    rc_validate, validate_problems, validate_verdicts = _run(["validate", profile, "--json", *flag])
    rc_plan, plan_problems, plan_verdicts = _run(["plan", profile, "--format", "json", *flag])
    assert rc_validate in (0, 2, 4) and rc_plan in (0, 2, 3, 4)
    assert (rc_validate == 2) == (rc_plan == 2), (rc_validate, rc_plan, validate_problems, plan_problems)
    assert validate_problems == plan_problems
    assert not (rc_plan == 4 and rc_validate == 0), plan_verdicts
    if rc_plan in (0, 4):
        assert rc_validate == rc_plan and validate_verdicts == plan_verdicts
    return rc_validate, rc_plan


@pytest.mark.parametrize("config", CONFIGS.values(), ids=list(CONFIGS))
@pytest.mark.parametrize("profile", CORPUS, ids=lambda p: str(p.relative_to(ROOT)))
def test_validate_and_plan_agree(profile, config, monkeypatch):
    monkeypatch.chdir(ROOT)
    agree(str(profile.relative_to(ROOT)), config)


@pytest.mark.parametrize("profile", PLAN_LEVEL, ids=lambda p: p.name)
def test_plan_level_rules_are_caught_by_validate(profile):
    rc, problems, _ = _run(["validate", str(profile), "--json"])
    assert rc == 2 and problems, "each of these profiles breaks a rule only the resolved plan shows"


def test_issue_30_a_quota_job_without_rdma_on_several_pods_is_refused_everywhere(monkeypatch):
    monkeypatch.chdir(ROOT)
    profile = str(RULE_BOOK.relative_to(ROOT) / "issue30_dlc_quota_without_rdma.yaml")
    assert agree(profile, None) == (0, 3)  # validate: valid but infeasible; plan: exit 3, never 4
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["resolve", profile, "--json"]) == 3
    doc = json.loads(out.getvalue())
    assert doc["reason_codes"] == ["multi-node-without-rdma"] and "dlc.enable_rdma is false" in doc["error"]
    assert any("dlc.enable_rdma: true" in s for s in doc["suggestions"])


@pytest.mark.parametrize("budget, exit_code", [(8, 0), (5, 4)])
def test_issue_30_the_policy_budget_prices_from_the_price_book(budget, exit_code, monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)
    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"gpu-hourly-budget": {"max_hourly_cost_cny": budget}}))
    profile = str(RULE_BOOK.relative_to(ROOT) / "issue30_price_book_budget.yaml")
    assert agree(profile, config) == (exit_code, exit_code)
    _, _, verdicts = _run(["plan", profile, "--format", "json", "--policy-config", str(config)])
    if exit_code:
        ((policy, level, _, message),) = verdicts
        assert policy == "gpu-hourly-budget" and level == "mandatory"
        assert "6.00 (on-demand, price-book)" in message  # the team's price, not the catalog's 9.53


PCIE_EXCEPTION = ROOT / "tests" / "data" / "pcie_exception"


@pytest.mark.parametrize("config, planned", [
    (None, False), ({"no-pcie-multi-gpu-training": {"allowed_types": ["ecs.ebmgn8is.32xlarge"]}}, True),
    ({"no-pcie-multi-gpu-training": "disabled"}, True), ({"no-pcie-multi-gpu-training": "advisory"}, False),
    ({"all": "mandatory", "no-pcie-multi-gpu-training": {"allowed_types": ["ecs.gn8is-4x.16xlarge"]}}, False),
], ids=["none", "allowed", "disabled", "advisory", "another-type"])
def test_the_pcie_exception_is_one_verdict(config, planned, monkeypatch, tmp_path):
    """Issue 35: the policy config's PCIe exception plans the L20 node in validate and plan alike."""
    monkeypatch.chdir(ROOT)
    path = None
    if config is not None:
        path = tmp_path / "policy.json"
        path.write_text(json.dumps(config))
    rc_validate, rc_plan = agree(str((PCIE_EXCEPTION / "l20-lora.yaml").relative_to(ROOT)), path)
    assert (rc_validate, rc_plan) == ((0, 0) if planned else (0, 3))


# ---- generated profiles --------------------------------------------------------------------------
PRICE_BOOK = """prices:
  - {region: cn-shenzhen, instance_type: ecs.gn7i-c8g1.2xlarge, on_demand_cny_per_hour: 6.0, as_of: "2026-01-01", source: t}
  - {region: cn-shenzhen, instance_type: ecs.ebmgn7ex.32xlarge, on_demand_cny_per_hour: 200.0, as_of: "2026-01-01", source: t}
  - {region: cn-wulanchabu, resource_id: quota-abc, on_demand_cny_per_hour: 20.0, as_of: "2026-01-01", source: t}
  - {region: cn-shenzhen, dlc_spec: ecs.gn7i-c8g1.2xlarge, on_demand_cny_per_hour: 7.0, as_of: "2026-01-01", source: t}
"""


@st.composite
def profiles(draw) -> dict:
    target = draw(st.sampled_from(["ecs", "ecs", "dlc", "auto"]))
    quota = target != "ecs" and draw(st.booleans())
    region = "cn-wulanchabu" if quota else "cn-shenzhen"
    model, method = draw(st.sampled_from([("llama-3.2-1b", "lora"), ("qwen2.5-7b", "lora"), ("llama-3-8b", "full"),
                                          ("llama-3-70b", "full")]))
    spot = draw(st.sampled_from(["never", "allow", "require"]))
    resources = {"target": target, "gpus": draw(st.sampled_from(["auto", 1, 2, 8, 16])),
                 "max_nodes": draw(st.integers(1, 4)), "spot": spot,
                 "self_healing": spot != "never" and draw(st.booleans()),
                 "max_hourly_cost": draw(st.sampled_from([None, 8, 300, 2000]))}
    if model == "llama-3-70b" or quota:
        resources["gpu_models"] = ["A100-80G"]
    doc = {"name": "gen", "region": region, "model": {"preset": model},
           "training": {"method": method, "precision": "bf16-mixed" if method == "full" else "bf16",
                        "gradient_checkpointing": True, "zero_stage": 3 if method == "full" else 0, "tokens": 1e8},
           "job": {"command": "torchrun train.py", "image": f"registry-vpc.{region}.aliyuncs.com/t/x:v1"},
           "resources": resources,
           "storage": {"checkpoint": draw(st.sampled_from(["oss", "cpfs", "essd"])), "dataset_gib": 50,
                       "retain_on_destroy": draw(st.booleans())},
           "tags": {"team": "nlp"} if draw(st.booleans()) else {}}
    if target != "ecs":
        dlc = {"workspace_id": "ws-1", "enable_rdma": draw(st.sampled_from([None, True, False]))}
        if quota:
            dlc["resource_id"] = "quota-abc"
        doc["dlc"] = {k: v for k, v in dlc.items() if v is not None}
    if draw(st.booleans()):
        doc["price_book"] = "prices.yaml"
    return doc


CONFIG_CHOICES = st.sampled_from([None, "example", {"gpu-hourly-budget": {"max_hourly_cost_cny": 50}},
                                  {"all": "mandatory", "required-tags": {"required_tags": ["team"]}}])


@settings(max_examples=24, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(doc=profiles(), config=CONFIG_CHOICES)
def test_generated_profiles_get_one_verdict(doc, config):
    with tempfile.TemporaryDirectory() as tmp:
        d = pathlib.Path(tmp)
        (d / "prices.yaml").write_text(PRICE_BOOK)
        (d / "profile.yaml").write_text(json.dumps(doc))
        path = None
        if config == "example":
            path = EXAMPLE_CONFIG
        elif config is not None:
            path = d / "policy.json"
            path.write_text(json.dumps(config))
        with contextlib.chdir(ROOT):
            agree(str(d / "profile.yaml"), path)
