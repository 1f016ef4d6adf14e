"""The policy config's PCIe exception, by group: every level (and ``all``) x every subset of the catalog's
PCIe multi-GPU types. The resolver lifts exactly what the config lists (every PCIe type when the policy
is disabled, nothing more for ``advisory``), and the pack's own check passes whatever it then plans."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainstack.catalog import load_catalog
from trainstack.errors import InfeasibleError
from trainstack.placement import NO_ALLOWANCES
from trainstack.profile import load_profile
from trainstack.rules import plan_verdicts, resolution
from trainstack.rules.policy_book import NO_PCIE_MULTI_GPU_TRAINING
from trainstack.rules.policy_config import LEVELS, policy_allowances

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "tests" / "data" / "pcie_exception" / "l20-lora.yaml"
L20_NODE = "ecs.ebmgn8is.32xlarge"
CAT = load_catalog()
PCIE = sorted(r.name for r in CAT.resolved_instances()
              if r.trainable and r.gpu_count > 1 and r.interconnect == "pcie")


@st.composite
def configs(draw) -> dict:
    types = draw(st.lists(st.sampled_from(PCIE + ["ecs.not-a-type"]), max_size=6, unique=True))
    level = draw(st.sampled_from([None, *LEVELS]))
    entry: dict = {"allowed_types": types}
    if level is not None:
        entry["enforcementLevel"] = level
    config: dict = {NO_PCIE_MULTI_GPU_TRAINING: entry}
    if draw(st.booleans()):
        config["all"] = draw(st.sampled_from(LEVELS))
    return config


def _level(config: dict) -> str:
    entry = config[NO_PCIE_MULTI_GPU_TRAINING]
    return entry.get("enforcementLevel") or config.get("all") or "mandatory"


@settings(max_examples=200, deadline=None)
@given(config=configs())
def test_the_allowances_are_the_listed_types_or_every_type_when_disabled(config):
    a = policy_allowances(config, "policy.json")
    disabled = _level(config) == "disabled"
    listed = set(config[NO_PCIE_MULTI_GPU_TRAINING]["allowed_types"])
    for inst in CAT.resolved_instances():
        lifted = a.lifts(inst)
        pcie = inst.gpu_count > 1 and inst.interconnect == "pcie" and not inst.multi_gpu_training_ok
        assert lifted == (pcie and (disabled or inst.name in listed)), inst.name
        exception = a.exception_for(inst)
        assert (exception is not None) == lifted
        if exception is not None:
            assert exception.setting == ("allowed_types" if inst.name in listed else "enforcementLevel")
            assert exception.source == "policy.json" and exception.policy == NO_PCIE_MULTI_GPU_TRAINING


def test_no_config_and_a_config_that_names_nothing_lift_nothing():
    assert policy_allowances(None) == NO_ALLOWANCES
    assert policy_allowances({"required-tags": "advisory"}) == NO_ALLOWANCES
    assert policy_allowances({NO_PCIE_MULTI_GPU_TRAINING: "advisory"}) == NO_ALLOWANCES


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(config=configs())
def test_what_the_resolver_plans_under_a_config_the_pack_lets_through(config):
    profile = load_profile(str(PROFILE))
    allowances = policy_allowances(config, "policy.json")
    allowed = _level(config) == "disabled" or L20_NODE in config[NO_PCIE_MULTI_GPU_TRAINING]["allowed_types"]
    try:
        res = resolution(profile, CAT, allowances=allowances)
    except InfeasibleError:
        assert not allowed, "the one priced L20 node is allowed: the job must be planned"
        return
    plan = res.plan
    inst = CAT.instance(plan.instance_type)
    assert allowances.lifts(inst) and plan.policy_exceptions == (allowances.exception_for(inst),)
    assert not [v for v in plan_verdicts(plan, config) if v.policy == NO_PCIE_MULTI_GPU_TRAINING]
    for c in res.candidates:  # every feasible multi-GPU PCIe candidate rests on the exception, labelled
        if c.feasible and c.gpus_per_node > 1 and CAT.instance(c.instance_type).interconnect == "pcie":
            assert allowances.allows_pcie(c.instance_type)
            assert any("PCIe exception" in label for label in c.labels)


@pytest.mark.parametrize("config", [{NO_PCIE_MULTI_GPU_TRAINING: {"allowed_types": [L20_NODE]}},
                                    {NO_PCIE_MULTI_GPU_TRAINING: "disabled"}, {"all": "disabled"}])
def test_the_l20_job_is_planned_on_the_pcie_node_only_when_allowed(config):
    profile = load_profile(str(PROFILE))
    with pytest.raises(InfeasibleError):
        resolution(profile, CAT)
    plan = resolution(profile, CAT, allowances=policy_allowances(config, "p.json")).plan
    assert plan.instance_type == L20_NODE and plan.parallelism.layout.tensor_parallel == 1
