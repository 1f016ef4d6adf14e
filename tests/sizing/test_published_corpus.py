"""The published corpus (tests/data/calibration/published-*.json, issue 32 item 2).

Every row must be traceable: a non-empty quote that holds the measured figure as written (or, in set C, the
figure as written plus the arithmetic that converts it, recomputed here), a known source, a GPU the catalog or
reference-gpus.yaml knows, a positive architecture. The corpus must cover what the issue asks (sources,
frameworks, MoE, multi-GPU LoRA/QLoRA under FSDP/ZeRO, FP8, long context, out-of-memory cases) with no document
holding more than a quarter of the rows a constant is fitted on. Set C's loader must state every row in
trainstack's types or say which field it would need.
"""

from __future__ import annotations

import copy
import json
import re
from collections import Counter, defaultdict

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.calibration_rows import (
    DATA, PARALLEL, PARALLEL_PROFILES, SET_A, SET_A_PROFILES, SET_B, SET_C, CorpusRow, load_set_c, reference_gpus,
)
from trainstack.catalog import load_catalog
from trainstack.models import find_preset
from trainstack.sizing import memory_estimate

GIB = 2**30
CAP = 0.25                     # no document above this share of the rows a constant is fitted on
A = json.loads(SET_A.read_text(encoding="utf-8"))
A_PUT = yaml.safe_load(SET_A_PROFILES.read_text(encoding="utf-8"))["rows"]
B = json.loads(SET_B.read_text(encoding="utf-8"))
P = json.loads(PARALLEL.read_text(encoding="utf-8"))
P_PUT = yaml.safe_load(PARALLEL_PROFILES.read_text(encoding="utf-8"))["rows"]
C = json.loads(SET_C.read_text(encoding="utf-8"))
C_KEYS = {s["key"] for s in C["sources"]}
GPUS = set(load_catalog().gpus) | set(reference_gpus())
ARCH_FIELDS = ("hidden_size", "num_layers", "num_attention_heads", "num_kv_heads", "intermediate_size", "vocab_size")
METHODS = {"full", "lora", "qlora", "pretrain"}
PRECISIONS = {"bf16", "bf16-mixed", "fp16-mixed", "fp8-mixed"}
SHARDING = {"single", "ddp", "fsdp", "fsdp2", "hsdp", "zero", "megatron", "megatron-fsdp"}
KINDS = {"allocated", "active", "reserved", "nvidia-smi", "unspecified", "fit-boundary"}
ROW_KEYS = ("id", "source", "quote", "locator", "framework", "framework_as_profile", "gpu", "gpus", "nodes", "model",
            "architecture", "architecture_source", "method", "quantization", "precision", "micro_batch_size",
            "sequence_length", "gradient_checkpointing", "optimizer", "sharding", "attention", "compile", "fused",
            "measured", "notes", "unstated", "assumptions", "fit")


def _numbers(text: str) -> set[float]:
    """Every number written in a text (thousands separators allowed)."""
    return {float(m.replace(",", "")) for m in re.findall(r"\d[\d,]*(?:\.\d+)?", text)}


def _written(quote: str, value: float) -> bool:
    return any(abs(n - value) <= 0.5 + 1e-9 * value for n in _numbers(quote)) if value >= 100 else \
        any(abs(n - value) < 0.006 for n in _numbers(quote))


def _first_number(text: str) -> float:
    return float(re.search(r"\d+(?:\.\d+)?", text.replace(",", "")).group(0))


def doc_of(url_or_repo: str, path: str = "") -> str:
    """A document's identity: owner/repo/path for GitHub files whatever the ref, else the URL."""
    m = re.match(r"https://github\.com/([^/]+/[^/]+)/blob/[^/]+/([^#]+)", url_or_repo)
    if m:
        return f"{m.group(1)}/{m.group(2)}"
    return f"{url_or_repo}/{path}" if path else url_or_repo.split("#")[0]


# ---- set C: one row -------------------------------------------------------------------------------------------

def row_problems(r: dict) -> list[str]:
    """Why a set-C row is not traceable or not well-formed (empty when it is)."""
    out = [f"missing field {k}" for k in ROW_KEYS if k not in r]
    if out:
        return out
    q, m = r["quote"], r["measured"]
    if not isinstance(q, str) or not q.strip():
        out.append("empty quote")
    if r["source"] not in C_KEYS:
        out.append(f"unknown source {r['source']!r}")
    if r["gpu"] is None:
        if not any("gpu" in u.lower() for u in r["unstated"]):
            out.append("gpu null but not listed in unstated")
    elif r["gpu"] not in GPUS:
        out.append(f"gpu {r['gpu']!r} is neither in the catalog nor in reference-gpus.yaml")
    if not isinstance(r["gpus"], int) or r["gpus"] < 1 or r["nodes"] < 1 or r["nodes"] * 8 < r["gpus"]:
        out.append("gpus / nodes not a layout")
    for k in ARCH_FIELDS:
        if not isinstance(r["architecture"].get(k), int) or r["architecture"][k] <= 0:
            out.append(f"architecture.{k} not a positive integer")
    if r.get("preset"):
        want = find_preset(r["preset"]).architecture
        for k, v in r["architecture"].items():
            if getattr(want, k, v) != v:
                out.append(f"architecture.{k} {v} differs from preset {r['preset']} ({getattr(want, k)})")
    if r["method"] not in METHODS or r["precision"] not in PRECISIONS:
        out.append("method or precision outside trainstack's vocabulary")
    if r["method"] in ("lora", "qlora") and not r.get("lora"):
        out.append("LoRA row without its lora block")
    if r["method"] == "qlora" and r["quantization"] == "none":
        out.append("QLoRA row without a quantization kind")
    if (r["precision"] == "fp8-mixed") != bool(r.get("fp8_recipe")):
        out.append("fp8_recipe must be given exactly for fp8 rows")
    if r["sharding"].get("kind") not in SHARDING:
        out.append(f"sharding.kind {r['sharding'].get('kind')!r}")
    if r["sequence_length"] is None and not any("sequence length" in u or "context" in u for u in r["unstated"]):
        if not m.get("oom"):
            out.append("sequence length null but not listed in unstated")
    out += _measured_problems(r)
    return out


def _measured_problems(r: dict) -> list[str]:
    q, m, out = r["quote"], r["measured"], []
    if m.get("kind") is not None and m["kind"] not in KINDS:
        out.append(f"measured.kind {m['kind']!r}")
    has_peak, has_tps = m.get("peak_gib") is not None, m.get("tokens_per_s_per_gpu") is not None
    if not (has_peak or has_tps or m.get("oom")):
        out.append("nothing measured")
    if not str(m.get("how_read", "")).strip():
        out.append("measured.how_read empty")
    if has_peak:
        pq = m.get("peak_quoted", "")
        if not pq or pq not in q:
            out.append(f"peak_quoted {pq!r} not in the quote")
        else:
            v = _first_number(pq)
            want = v if m.get("peak_unit_read") == "GiB" else v * 1e9 / GIB if m.get("peak_unit_read") == "GB" else None
            if want is None or abs(want - m["peak_gib"]) > 0.01:
                out.append(f"peak_gib {m['peak_gib']} is not {pq!r} read as {m.get('peak_unit_read')}")
    if m.get("oom"):
        if has_tps or not m.get("oom_quoted") or m["oom_quoted"] not in q:
            out.append("an OOM row needs its OOM statement quoted and no throughput")
        if r["fit"]:
            out.append("an OOM row is never fitted on")
    if has_tps:
        out += _throughput_problems(r)
    return out


def _throughput_problems(r: dict) -> list[str]:
    q, m = r["quote"], r["measured"]
    tq, how, tps = m.get("throughput_quoted"), m.get("throughput_from"), m["tokens_per_s_per_gpu"]
    if not tq or tq not in q:
        return [f"throughput_quoted {tq!r} not in the quote"]
    v = _first_number(tq)
    if how == "tokens_per_s_per_gpu":
        want = v
    elif how == "seconds_per_step":
        want = m["tokens_per_step"] / m["seconds_per_step"] / r["gpus"] if m.get("seconds_per_step") == v else None
    elif how == "run_seconds":
        want = m["samples"] * r["sequence_length"] / m["run_seconds"] / r["gpus"] if m.get("run_seconds") == v else None
    elif how == "tokens_per_s_all_gpus":
        want = m["tokens_per_s_all_gpus"] / r["gpus"] if m.get("tokens_per_s_all_gpus") == v else None
    else:
        return [f"throughput_from {how!r}"]
    if want is None or tps <= 0 or abs(want - tps) > 0.001 * want + 0.1:
        return [f"tokens_per_s_per_gpu {tps} does not follow from {tq!r} ({how})"]
    return []


@pytest.mark.parametrize("row", C["rows"], ids=[r["id"] for r in C["rows"]])
def test_set_c_row_is_traceable(row):
    assert row_problems(row) == []


def test_set_c_ids_and_sources_are_unique_and_used():
    ids = [r["id"] for r in C["rows"]]
    assert len(ids) == len(set(ids))
    keys = [s["key"] for s in C["sources"]]
    assert len(keys) == len(set(keys))
    used = {r["source"] for r in C["rows"]}
    assert used == set(keys), set(keys) ^ used
    for s in C["sources"]:
        assert s["url"].startswith("https://") and s["framework"] and s["what_it_measures"] and s["retrieved"]
        assert s["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", s["commit"]) or s["commit"].startswith("various")


_MUTATIONS = ("drop-field", "empty-quote", "peak", "tokens", "source", "gpu", "hidden", "peak-quote", "oom-fit")


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(i=st.integers(0, len(C["rows"]) - 1), how=st.sampled_from(_MUTATIONS), factor=st.floats(1.02, 3.0),
       field=st.sampled_from(ROW_KEYS))
def test_a_corrupted_row_is_caught(i, how, factor, field):
    """Any one of the checked facts changed in any row is reported (the checks can fail)."""
    r = copy.deepcopy(C["rows"][i])
    m = r["measured"]
    if how == "drop-field":
        del r[field]
    elif how == "empty-quote":
        r["quote"] = " "
    elif how == "peak" and m.get("peak_gib") is not None:
        m["peak_gib"] *= factor
    elif how == "tokens" and m.get("tokens_per_s_per_gpu"):
        m["tokens_per_s_per_gpu"] *= factor
    elif how == "source":
        r["source"] = r["source"] + "-x"
    elif how == "gpu":
        r["gpu"] = "NoSuchGPU"
    elif how == "hidden":
        r["architecture"]["hidden_size"] = 0
    elif how == "peak-quote" and m.get("peak_gib") is not None:
        m["peak_quoted"] = m["peak_quoted"] + " x"
    elif how == "oom-fit" and m.get("oom"):
        r["fit"] = True
    else:
        r["quote"] = ""
    assert row_problems(r)


# ---- sets A, B and the parallel file ------------------------------------------------------------------------

def test_set_a_rows_are_traceable():
    for r in A:
        assert r["quote"].strip() and r["source_url"].startswith("https://"), r["id"]
        for key in ("measured_peak_gib", "measured_tokens_per_s_per_gpu"):
            v = r.get(key)
            if v is not None:
                assert _written(r["quote"], v) or r["notes"].strip(), (r["id"], key)   # else the notes say how
    for rid, p in A_PUT.items():
        assert p["gpu"] in GPUS, (rid, p["gpu"])


def test_set_b_rows_are_traceable():
    for r in B["rows"]:
        assert r["quote"].strip() and r["source_url"].startswith("https://"), r["id"]
        assert _written(r["quote"], r["measured_tokens_per_s_per_gpu"]), r["id"]
        assert r["gpu"] in GPUS, r["id"]
        assert all(isinstance(r["architecture"][k], int) and r["architecture"][k] > 0 for k in ARCH_FIELDS), r["id"]


def test_parallel_rows_are_traceable():
    for r in P["rows"]:
        assert r["quote"].strip() and r["source_url"].startswith("https://"), r["id"]
        for key in ("measured_tokens_per_s_per_gpu", "measured_gib"):
            if r.get(key) is not None:
                assert _written(r["quote"], r[key]), (r["id"], key)
    for rid, p in P_PUT.items():
        if "not_expressible" not in p:
            assert p["gpu"] in GPUS, (rid, p["gpu"])


# ---- the corpus goals ---------------------------------------------------------------------------------------

def _c_source(r: dict) -> dict:
    return next(s for s in C["sources"] if s["key"] == r["source"])


def _c_doc(r: dict) -> str:
    s = _c_source(r)
    return doc_of(s["url"]) if s["path"] is None or s["commit"] is None or s["commit"].startswith("various") \
        else f"{s['repo']}/{s['path']}"


def corpus_documents() -> set[str]:
    docs = {doc_of(r["source_url"]) for r in A} | {doc_of(r["source_url"]) for r in B["rows"]}
    docs |= {doc_of(r["source_url"]) for r in P["rows"]}
    return docs | {_c_doc(r) for r in C["rows"]}


def corpus_frameworks() -> set[str]:
    """The real training stacks behind the rows (the name before any parenthesis)."""
    names = {r["framework"] for r in A} | {"llm-foundry"} | {r["framework"] for r in P["rows"]}
    names |= {r["framework"].split(" (")[0] for r in C["rows"]}
    return {n.strip().lower() for n in names}


def classes(r: dict) -> set[str]:
    """The error classes of issue 32 a set-C row belongs to."""
    out = set()
    if r["architecture"].get("num_experts", 0) > 0:
        out.add("moe")
    s = r["sharding"]
    if r["method"] in ("lora", "qlora") and r["gpus"] > 1 and s["kind"] in ("fsdp", "fsdp2", "hsdp", "zero"):
        out.add("multi-gpu lora/qlora under fsdp/zero")
    if r["precision"] == "fp8-mixed":
        out.add("fp8")
    if (r["sequence_length"] or 0) >= 16384:
        out.add("long context")
    if r["measured"]["oom"]:
        out.add("oom")
    return out


GOALS = {"moe": (8, 2), "multi-gpu lora/qlora under fsdp/zero": (8, 2), "fp8": (6, 1), "long context": (6, 1),
         "oom": (6, 2)}


def class_counts() -> dict[str, tuple[int, int]]:
    rows, sources = Counter(), defaultdict(set)
    for r in C["rows"]:
        for c in classes(r):
            rows[c] += 1
            sources[c].add(r["source"])
    return {c: (rows[c], len(sources[c])) for c in GOALS}


def test_corpus_goals():
    assert len(C["rows"]) >= 60
    assert len(corpus_documents()) >= 15
    assert len(corpus_frameworks()) >= 8
    for c, (n, k) in class_counts().items():
        want_n, want_k = GOALS[c]
        assert n >= want_n and k >= want_k, (c, n, k)


def _shares(rows: list[tuple[str, str]]) -> dict[str, dict[str, float]]:
    """{kind: {document: share}} over (kind, document) pairs."""
    by = defaultdict(Counter)
    for kind, doc in rows:
        by[kind][doc] += 1
    return {k: {d: n / sum(c.values()) for d, n in c.items()} for k, c in by.items()}


def _kinds(m: dict) -> list[str]:
    return (["memory"] if m.get("peak_gib") is not None else []) + (["speed"] if m.get("tokens_per_s_per_gpu") else [])


def test_no_document_above_a_quarter_of_the_rows_fitted_on():
    """Set C's fit rows, and every measured row of sets A, C and the parallel file together; set B (216 rows of
    one llm-foundry table) is the known exception, weighted by whoever fits across it (docs/sizing.md, Corpus)."""
    fit_c = [(k, r["source"]) for r in C["rows"] if r["fit"] for k in _kinds(r["measured"])]
    for kind, share in _shares(fit_c).items():
        assert max(share.values()) <= CAP, (kind, max(share.items(), key=lambda kv: kv[1]))
    every = [(k, _c_doc(r)) for r in C["rows"] for k in _kinds(r["measured"])]
    for r in A:
        every += [("memory", doc_of(r["source_url"]))] * (r.get("measured_peak_gib") is not None)
        every += [("speed", doc_of(r["source_url"]))] * bool(r.get("measured_tokens_per_s_per_gpu"))
    for r in P["rows"]:
        every += [("memory", doc_of(r["source_url"]))] * (r.get("measured_gib") is not None)
        every += [("speed", doc_of(r["source_url"]))] * bool(r.get("measured_tokens_per_s_per_gpu"))
    for kind, share in _shares(every).items():
        assert max(share.values()) <= CAP, (kind, max(share.items(), key=lambda kv: kv[1]))


def test_sizing_doc_names_every_source():
    """docs/sizing.md's Corpus section lists every set-C source key (the maintainers score on the others)."""
    text = (DATA.parents[2] / "docs" / "sizing.md").read_text(encoding="utf-8")
    section = text.split("## Corpus", 1)[1]
    assert all(f"`{k}`" in section for k in C_KEYS), [k for k in C_KEYS if f"`{k}`" not in section]


# ---- the set-C loader ---------------------------------------------------------------------------------------

def test_loader_states_every_row_or_says_why_not():
    rows, rest = load_set_c()
    assert len(rows) + len(rest) == len(C["rows"])
    assert {r.id for r in rows}.isdisjoint({r.id for r in rest})
    for r in rest:
        assert r.missing and all(m.startswith(("not expressible yet: ", "unstated: ")) for m in r.missing), r
    by_id = {r["id"]: r for r in C["rows"]}
    for r in rows:
        src = by_id[r.id]
        t, s = r.training, src["sharding"]
        assert (t.method, t.micro_batch_size, t.sequence_length) == (src["method"], src["micro_batch_size"],
                                                                     src["sequence_length"])
        assert (t.tensor_parallel, t.pipeline_parallel, t.context_parallel, t.expert_parallel) == \
            (s["tp"], s["pp"], s["cp"], s["ep"])
        assert r.arch.hidden_size == src["architecture"]["hidden_size"]
        assert r.oom == src["measured"]["oom"] and r.tokens_per_second == src["measured"].get("tokens_per_s_per_gpu")


def test_loader_blocks_what_the_profile_cannot_state():
    """Rows with CPU offload or Ulysses sequence parallelism are never stated as something else (HSDP rows are
    stated: training.sharding hybrid)."""
    _, rest = load_set_c()
    reasons = {r.id: " ".join(r.missing) for r in rest}
    for src in C["rows"]:
        if src.get("offload"):
            assert "training.offload" in reasons.get(src["id"], ""), src["id"]
        if src["sharding"].get("sp", 1) != 1:
            assert "sequence_parallel" in reasons.get(src["id"], ""), src["id"]


def test_expressible_rows_can_be_sized():
    """Each stated row goes through the memory model (the rows are usable, whatever the error)."""
    rows, _ = load_set_c()
    assert rows and all(isinstance(r, CorpusRow) for r in rows)
    for r in rows:
        assert memory_estimate(r.arch, r.training, r.gpus).required_gib_per_gpu > 0, r.id
