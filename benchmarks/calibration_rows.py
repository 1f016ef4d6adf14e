"""Read the measured rows into trainstack's own types for the benchmarks and tests.

* the H200 rows (``h200-training-steps.json``, ``h200-heldout.json``): one GPU, the calibration harness;
* the published rows: ``published-set-a.json`` (put to trainstack by ``published-set-a-profiles.yaml``)
  and ``published-set-b-llm-foundry.json`` (each row states its configuration). Rows on GPUs the catalog
  does not sell use ``reference-gpus.yaml``.
"""

from __future__ import annotations

import functools
import json
import math
import pathlib
from typing import Any, NamedTuple, Optional, Union

import yaml

from trainstack.catalog import load_catalog
from trainstack.catalog.models import GpuModel
from trainstack.models import Architecture, find_preset
from trainstack.profile import LoraSpec, TrainingSpec

DATA = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "calibration"
CALIBRATION = DATA / "h200-training-steps.json"
HELDOUT = DATA / "h200-heldout.json"
SET_A = DATA / "published-set-a.json"
SET_A_PROFILES = DATA / "published-set-a-profiles.yaml"
SET_B = DATA / "published-set-b-llm-foundry.json"
PARALLEL = DATA / "published-parallel.json"
PARALLEL_PROFILES = DATA / "published-parallel-profiles.yaml"
PARALLEL_CATEGORY = "tensor / pipeline / context parallel"
REFERENCE_GPUS = DATA / "reference-gpus.yaml"


class Row(NamedTuple):
    id: str
    model: str
    arch: Architecture
    training: TrainingSpec
    peak_gib: float
    reserved_gib: float
    tokens_per_second: float


def load_rows(path: Union[str, pathlib.Path] = CALIBRATION) -> list[Row]:
    """Every row of an H200 calibration file, the conditions turned into trainstack's own types."""
    doc: list[dict[str, Any]] = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    rows = []
    for r in doc:
        lora = LoraSpec(rank=r["lora"]["rank"], targets=r["lora"]["targets"]) if r.get("lora") else None
        training = TrainingSpec(method=r["method"], precision=r["precision"], optimizer="adamw",
                                micro_batch_size=r["micro_batch_size"], sequence_length=r["sequence_length"],
                                gradient_checkpointing=r["gradient_checkpointing"], lora=lora)
        m = r["measured"]
        rows.append(Row(r["id"], r["model"], Architecture(**r["architecture"]), training,
                        m["peak_allocated_bytes"] / 2**30, m["peak_reserved_bytes"] / 2**30,
                        m["tokens_per_second"]))
    return rows


def harness_casts_on_gpu(row: Row) -> bool:
    """The calibration harness builds the model in fp32 on the GPU and casts it there
    (measure.py: ``LlamaForCausalLM(cfg).to(dtype)`` under ``torch.device("cuda")``)."""
    return row.training.precision == "bf16"


# ---- published rows ---------------------------------------------------------------------------

class PublishedRow(NamedTuple):
    id: str
    source: str
    framework: str
    category: str
    arch: Architecture
    training: TrainingSpec
    gpu: GpuModel
    gpus: int
    per_node: int
    nodes: int
    interconnect: str
    network: str
    network_gbps: Optional[float]
    compare: Optional[str]          # allocated | reserved | whole-gpu | fit-boundary | None
    measured_gib: Optional[float]
    tokens_per_second: Optional[float]
    fit: bool                       # used by benchmarks/fit_calibration.py (else measured only)
    boundary_gib: Optional[float] = None  # fit-boundary rows: the memory the source's boundary is at (else usable)


@functools.lru_cache(maxsize=1)
def reference_gpus() -> dict[str, GpuModel]:
    doc = yaml.safe_load(REFERENCE_GPUS.read_text(encoding="utf-8"))
    return {g["name"]: GpuModel(**{k: v for k, v in g.items() if k in GpuModel.model_fields})
            for g in doc["gpus"]}


def gpu_named(name: str) -> GpuModel:
    ref = reference_gpus()
    return ref[name] if name in ref else load_catalog().gpu(name)


def _category(t: TrainingSpec, gpus: int, gpu: GpuModel) -> str:
    if t.method == "qlora":
        return "QLoRA"
    if gpus > 1:
        return "multi-GPU / ZeRO / FSDP"
    return "single GPU H100/H200" if gpu.architecture == "hopper" else "other single GPU"


def _layout(gpus: int, network: Optional[dict]) -> tuple[int, int, str, str, Optional[float]]:
    per_node = min(gpus, 8)
    nodes = math.ceil(gpus / per_node)
    kind = (network or {}).get("kind", "roce")
    return per_node, nodes, "nvswitch" if per_node > 1 else "none", kind, (network or {}).get("gbps")


def _set_a() -> list[PublishedRow]:
    facts = {r["id"]: r for r in json.loads(SET_A.read_text(encoding="utf-8"))}
    put = yaml.safe_load(SET_A_PROFILES.read_text(encoding="utf-8"))["rows"]
    out = []
    for rid, p in put.items():
        r = facts[rid]
        model = p["model"]
        arch = find_preset(model["preset"]).architecture if "preset" in model else Architecture(**model["architecture"])
        t = TrainingSpec(**p["training"])
        gpus = p.get("gpus", 1)
        gpu = gpu_named(p["gpu"])
        per_node, nodes, ic, net, gbps = _layout(gpus, p.get("network"))
        compare = p.get("compare")
        if compare == "not comparable":
            compare = None
        # the unit the source states: GB (10^9 bytes) where the profiles file says so, else GiB
        unit = 1e9 / 2**30 if p.get("measured_unit") == "GB" else 1.0
        out.append(PublishedRow(rid, r["source_url"], t.framework, _category(t, gpus, gpu), arch, t, gpu, gpus,
                                per_node, nodes, ic, net, gbps, compare,
                                (p.get("boundary_gib") or r["measured_peak_gib"] * unit) if compare else None,
                                None if "tokens_per_second" in p else r.get("measured_tokens_per_s_per_gpu"),
                                p.get("fit", True), p.get("boundary_gib")))
    return out


def _set_b() -> list[PublishedRow]:
    doc = json.loads(SET_B.read_text(encoding="utf-8"))
    out = []
    usable = [r for r in doc["rows"] if r["expressible"] == "yes"]
    for i, r in enumerate(usable):
        t = TrainingSpec(method="pretrain", precision=r["precision"], micro_batch_size=r["micro_batch_size"],
                         sequence_length=r["sequence_length"], gradient_checkpointing=r["gradient_checkpointing"],
                         zero_stage=3, gradient_accumulation_steps=r["gradient_accumulation_steps"],
                         framework="llm-foundry", loss="fused")
        gpu = gpu_named(r["gpu"])
        network = {"kind": "roce", "gbps": r["network_gbps_per_node"]} if r["network_gbps_per_node"] else None
        per_node, nodes, ic, net, gbps = _layout(r["gpus"], network)
        # every second row is held out of the fit (measured, never fitted on)
        out.append(PublishedRow(r["id"], r["source_url"], "llm-foundry", _category(t, r["gpus"], gpu),
                                Architecture(**r["architecture"]), t, gpu, r["gpus"], per_node, nodes, ic, net, gbps,
                                None, None, r["measured_tokens_per_s_per_gpu"], i % 2 == 0))
    return out


def load_parallel() -> list[PublishedRow]:
    """The rows that state a tensor/pipeline/context-parallel layout (published-parallel.json), put to
    trainstack by published-parallel-profiles.yaml; rows it marks ``not_expressible`` are left out."""
    facts = {r["id"]: r for r in json.loads(PARALLEL.read_text(encoding="utf-8"))["rows"]}
    put = yaml.safe_load(PARALLEL_PROFILES.read_text(encoding="utf-8"))["rows"]
    out = []
    for rid, p in put.items():
        if "not_expressible" in p:
            continue
        r = facts[rid]
        model = p["model"]
        arch = find_preset(model["preset"]).architecture if "preset" in model else Architecture(**model["architecture"])
        t = TrainingSpec(**p["training"])
        gpus = p["gpus"]
        gpu = gpu_named(p["gpu"])
        per_node, nodes, ic, net, gbps = _layout(gpus, p.get("network"))
        compare = p.get("compare")
        out.append(PublishedRow(rid, r["source_url"], t.framework, PARALLEL_CATEGORY, arch, t, gpu, gpus, per_node,
                                nodes, ic, net, gbps, compare, r.get("measured_gib") if compare else None,
                                r.get("measured_tokens_per_s_per_gpu"), bool(p.get("fit", False))))
    return out


def parallel_ids() -> tuple[list[str], dict[str, str]]:
    """(every row id of published-parallel.json, why each left-out row cannot be stated)."""
    ids = [r["id"] for r in json.loads(PARALLEL.read_text(encoding="utf-8"))["rows"]]
    put = yaml.safe_load(PARALLEL_PROFILES.read_text(encoding="utf-8"))["rows"]
    return ids, {rid: p["not_expressible"] for rid, p in put.items() if "not_expressible" in p}


def load_published() -> list[PublishedRow]:
    """Every published row trainstack can state, set A first."""
    return _set_a() + _set_b()
