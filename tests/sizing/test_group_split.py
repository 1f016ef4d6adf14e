"""Leave-one-source-out validation (issue 32): no row of a scored source is in the fit that scores it.

The harness's fitting functions are wrapped to record every row they are handed; each fold's rows must
come from the other sources only (and, inside the H200 harness, from the other models for the memory
constants only it can fit). Refitting is deterministic, and no source weighs more than 25 % of a fit.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks import fitting as F
from benchmarks.group_validation import Fitters, leave_one_source_out
from benchmarks.observations import H200_SOURCE, load_observations, source_of_url, sources

OBS = load_observations()


class Recorder:
    """Fitters that record what each call received, then fit as production does."""

    def __init__(self) -> None:
        self.speed_calls: list[set[str]] = []
        self.memory_calls: list[tuple[set[str], set[str]]] = []

    def speed(self, rows):
        self.speed_calls.append({o.source for o in rows})
        return F.fit_speed(rows)

    def memory(self, rows):
        self.memory_calls.append(({o.source for o in rows}, {o.model for o in rows}))
        return F.fit_memory(rows)


def test_no_row_of_a_scored_source_reaches_its_fit():
    held = ["mosaicml/llm-foundry", "pytorch/torchtitan", "NVIDIA/cudnn-frontend"]
    rec = Recorder()
    res = leave_one_source_out(OBS, Fitters(speed=rec.speed, memory=rec.memory), only=held)
    assert len(rec.speed_calls) == len(held)
    for src, seen in zip(held, rec.speed_calls):
        assert src not in seen and seen, src
    # every scored row belongs to the source of its fold, and every row of those sources is scored
    scored = {r.obs.id for r in res.residuals}
    assert scored == {o.id for o in OBS if o.source in held}
    # the memory constants are fitted on the H200 rows only (no other source states the allocator)
    assert all(srcs == {H200_SOURCE} for srcs, _ in rec.memory_calls)


def test_the_h200_harness_is_one_source_and_its_memory_constants_are_left_out_by_model():
    rec = Recorder()
    res = leave_one_source_out(OBS, Fitters(speed=rec.speed, memory=rec.memory), only=[H200_SOURCE])
    assert rec.speed_calls and all(H200_SOURCE not in seen for seen in rec.speed_calls)
    models = sorted({o.model for o in OBS if o.source == H200_SOURCE})
    assert len(rec.memory_calls) == len(models) >= 4
    for model, (_, fitted_models) in zip(models, rec.memory_calls):
        assert model not in fitted_models
    by_fold = {fold for fold in res.folds}
    assert by_fold == {f"{H200_SOURCE} / {m}" for m in models}


def test_refitting_is_deterministic():
    rest = [o for o in OBS if o.source != "pytorch/ao"]
    a, b = F.fit_speed(rest), F.fit_speed(rest)
    assert a == b                                   # the same rows: the same constants, bit for bit
    shuffled = F.fit_speed(list(reversed(rest)))    # another order: only the float summation order differs
    assert all(abs(shuffled[k] / a[k] - 1) < 1e-9 for k in a)
    h200 = [o for o in OBS if o.source == H200_SOURCE]
    assert F.fit_memory(h200) == F.fit_memory(h200[::-1])


def test_the_fit_does_not_start_from_the_shipped_constants():
    """A fold's constants depend on its rows only, not on what constants.py holds at the time."""
    rest = [o for o in OBS if o.source != "pytorch/ao"]
    first = F.fit_speed(rest)
    with F.constants(speed={k: v * 1.3 for k, v in first.items()}):
        assert F.fit_speed(rest) == first


def test_no_source_weighs_more_than_a_quarter_of_the_speed_fit():
    rows = [o for o in OBS if o.has_speed and o.fittable]
    weights = F.row_weights(rows)
    by: dict[str, float] = {}
    for o, w in zip(rows, weights):
        by[o.source] = by.get(o.source, 0.0) + w
    assert abs(sum(by.values()) - 1) < 1e-9
    assert max(by.values()) <= F.SOURCE_CAP + 1e-9
    # llm-foundry holds more than half of the speed rows and weighs at most the cap; the H200 harness (the
    # exactly known rows) weighs the cap
    n = sum(1 for o in rows if o.source == "mosaicml/llm-foundry")
    assert n / len(rows) > 0.5 and by["mosaicml/llm-foundry"] <= F.SOURCE_CAP + 1e-9
    assert abs(by[H200_SOURCE] - F.SOURCE_CAP) < 1e-9


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text("abcdefgh", min_size=1, max_size=3), st.integers(1, 500), min_size=1, max_size=12))
def test_source_shares_are_capped_and_sum_to_one(counts):
    shares = F.source_shares(counts)
    assert set(shares) == set(counts)
    assert abs(sum(shares.values()) - 1) < 1e-9
    if len(counts) * F.SOURCE_CAP >= 1:
        assert max(shares.values()) <= F.SOURCE_CAP + 1e-9
        # more rows never weigh less
        for a in counts:
            for b in counts:
                if counts[a] > counts[b]:
                    assert shares[a] >= shares[b] - 1e-12
    else:
        assert len(set(round(v, 12) for v in shares.values())) == 1


def test_sources_group_repositories_and_series():
    assert source_of_url("https://github.com/pytorch/torchtitan/blob/main/x.md") == "pytorch/torchtitan"
    assert source_of_url("https://github.com/NVIDIA/NeMo/blob/main/y.md") == "NVIDIA NeMo performance summary"
    assert source_of_url("https://unsloth.ai/docs/basics/unsloth-benchmarks") == "unsloth"
    groups = sources(OBS)
    assert H200_SOURCE in groups and len(groups) >= 15
    # one benchmark series under two repositories is one source: set A's NeMo rows and set C's Megatron-Bridge
    nemo = {o.corpus for o in OBS if o.source == "NVIDIA NeMo performance summary"}
    assert {"set-a", "parallel", "set-c"} <= nemo
