"""Every refusal reason the per-type rules produce cites a source that says it (issue 35).

Walks static_rejection over every catalog type, every stack profile and every precision: a reason
that cites a source names a tag of sources.yaml and a citation of families.yaml whose quote carries
the claim; the PCIe refusal always cites one where Alibaba states the link; Alibaba's Transformer
corruption warning (said of gn7e, ebmgn7e, ebmgn7ex) is never the reason for a PCIe family.
"""

from __future__ import annotations

import glob
import itertools

import pytest
from hypothesis import given, settings, strategies as st

from trainstack.catalog import load_catalog
from trainstack.catalog.citations import gpu_stem
from trainstack.placement.allowances import NO_ALLOWANCES, PolicyAllowances
from trainstack.placement.engine import static_rejection
from trainstack.placement.interconnect import gradient_gb
from trainstack.profile import load_profile
from trainstack.reasons import ReasonCode

PRECISIONS = ("bf16", "bf16-mixed", "fp16-mixed", "fp8-mixed")
PROFILES = sorted(glob.glob("stacks/profiles/*.yaml"))
WARNING_FAMILIES = {"gn7e", "ebmgn7e", "ebmgn7ex"}


def with_precision(profile, precision):
    return profile.model_copy(update={"training": profile.training.model_copy(update={"precision": precision})})


@pytest.fixture(scope="module")
def cat():
    return load_catalog()


def unrestricted(profile):
    r = profile.resources
    free = r.model_copy(update={"gpu_models": type(r.gpu_models)(), "instance_types": type(r.instance_types)()})
    return profile.model_copy(update={"resources": free})


@pytest.fixture(scope="module")
def profiles():
    """The stack profiles without their allow-lists, so every type reaches the interconnect rule."""
    return [unrestricted(load_profile(p)) for p in PROFILES]


def all_reasons(cat, profiles):
    for profile, precision in itertools.product(profiles, PRECISIONS):
        p = with_precision(profile, precision)
        for inst in cat.resolved_instances():
            why = static_rejection(p, inst)
            if why is not None:
                yield p, inst, why


def check_cited(cat, inst, why):
    """The reason's source is known and its citation is the family's own, of a kind that backs the rule."""
    assert why.source in cat.sources, (inst.name, why.source)
    kind, family, fact = why.fact.split(".")
    assert (kind, family) == ("families", inst.family.name), why.fact
    cite = inst.family.cite(fact)
    assert cite is not None and cite.source == why.source, (inst.name, why.fact)
    assert cite.claim in ("gpu-link-pcie", "gpu-part"), cite.claim
    assert cite.supports(cite.claim, gpu_stem(inst.gpu.name)), cite.quote
    assert f"[{cite.source}: \"{cite.quote}\"]" in why.message


def test_every_cited_reason_rests_on_a_quote_that_says_it(cat, profiles):
    seen_codes = set()
    for _, inst, why in all_reasons(cat, profiles):
        seen_codes.add(why.code)
        assert "corrupt" not in why.message.lower(), (inst.name, why.message)
        if why.source is not None or why.fact is not None:
            check_cited(cat, inst, why)
        if why.code is ReasonCode.MULTI_GPU_WITHOUT_NVLINK:
            assert inst.gpu_count > 1 and not inst.multi_gpu_training_ok
            if inst.interconnect == "pcie":  # every PCIe family the engine can reach states its link or card
                assert why.source is not None, inst.name
                check_cited(cat, inst, why)
            else:
                assert why.source is None and "unverified interconnect" in why.message
    assert ReasonCode.MULTI_GPU_WITHOUT_NVLINK in seen_codes


def test_the_corruption_warning_is_recorded_only_where_alibaba_says_it(cat):
    warned = {f.name for f in cat.families.values() if f.cite("nvlink_required_for_transformer")}
    assert warned == WARNING_FAMILIES
    for name in warned:
        fam = cat.families[name]
        assert fam.interconnect in ("nvlink", "nvswitch")
        assert fam.cite("nvlink_required_for_transformer").supports("nvlink-required-for-transformer")
    for fam in cat.families.values():
        for c in fam.citations:
            if c.claim == "nvlink-required-for-transformer":
                assert fam.name in WARNING_FAMILIES


def test_the_pcie_reason_states_the_link_and_the_traffic(cat, profiles):
    p = with_precision(profiles[0], "bf16-mixed")
    why = static_rejection(p, cat.instance("ecs.ebmgn8is.32xlarge"))
    assert why.code is ReasonCode.MULTI_GPU_WITHOUT_NVLINK and why.source == "EBM-ZH"
    assert why.fact == "families.ebmgn8is.pcie"
    assert "PCIe Gen4" in why.message and "64 GB/s per GPU" in why.message and "32 GB/s each way" in why.message
    grads = gradient_gb(p, 8)
    assert f"{grads:,.2f} GB of gradients" in why.message or f"{grads * 1000:,.1f} MB of gradients" in why.message


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_an_allowed_pcie_type_passes_the_rule_and_nothing_else_changes(cat, profiles, data):
    pcie = sorted(r.name for r in cat.resolved_instances()
                  if r.trainable and r.gpu_count > 1 and r.interconnect == "pcie")
    allowed = frozenset(data.draw(st.lists(st.sampled_from(pcie), min_size=1, max_size=5)))
    profile = with_precision(data.draw(st.sampled_from(profiles)), data.draw(st.sampled_from(PRECISIONS)))
    allowances = PolicyAllowances(pcie_multi_gpu_types=allowed, source="policy.yaml")
    for inst in cat.resolved_instances():
        before = static_rejection(profile, inst, NO_ALLOWANCES)
        after = static_rejection(profile, inst, allowances)
        if inst.name in allowed and before is not None and before.code is ReasonCode.MULTI_GPU_WITHOUT_NVLINK:
            assert after is None, inst.name  # the exception lifts exactly this rule
        else:
            assert after == before, inst.name


def test_an_allowance_never_lifts_an_unverified_interconnect(cat, profiles):
    gn7s = next(r for r in cat.resolved_instances() if r.family.name == "gn7s" and r.gpu_count > 1)
    allowances = PolicyAllowances(pcie_multi_gpu_types=frozenset({gn7s.name}))
    why = static_rejection(profiles[0], gn7s, allowances)
    assert why is not None and why.code is ReasonCode.MULTI_GPU_WITHOUT_NVLINK
    assert "ecs.gn7s" in allowances.pcie_label(gn7s.name) and "PCIe exception" in allowances.pcie_label(gn7s.name)
