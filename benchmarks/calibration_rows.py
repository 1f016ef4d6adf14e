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


# ---- set C: the broader corpus (issue 32) -----------------------------------------------------------------------

SET_C = DATA / "published-set-c.json"

#: how each measured memory kind of set C is compared (the PublishedRow.compare vocabulary)
_COMPARE = {"reserved": "reserved", "allocated": "allocated", "active": "allocated", "nvidia-smi": "whole-gpu",
            "unspecified": "whole-gpu", "fit-boundary": "fit-boundary"}
#: sharding kinds today's profile states (ZeRO stage; FSDP = ZeRO-3; Megatron's distributed optimizer = ZeRO-1)
_ZERO = {"single": 0, "ddp": 0, "fsdp": 3, "fsdp2": 3, "megatron": 1, "hsdp": 3}
#: frameworks whose default is no activation recompute (Megatron-LM recompute_granularity None; torchtitan mode none)
_NO_RECOMPUTE_BY_DEFAULT = ("megatron", "torchtitan")


class CorpusRow(NamedTuple):
    """A set-C row stated in trainstack's types; ``approximated`` lists what the profile states less exactly."""
    id: str
    source: str
    framework: str
    category: str
    arch: Architecture
    training: TrainingSpec
    gpu: Optional[GpuModel]         # None: the source states only a memory size (memory_limit_gib)
    gpus: int
    per_node: int
    nodes: int
    network_gbps: Optional[float]
    compare: Optional[str]          # allocated | reserved | whole-gpu | fit-boundary | None
    measured_gib: Optional[float]
    tokens_per_second: Optional[float]
    oom: bool                       # ran out of memory: an estimate must not call it fitting
    memory_limit_gib: Optional[float]   # the memory the OOM or fit boundary is at, where not a GPU's usable memory
    approximated: tuple[str, ...]


class NotExpressible(NamedTuple):
    id: str
    source: str
    missing: tuple[str, ...]    # each "not expressible yet: <field>" or "unstated: <what>"


def _lora(r: dict, missing: list[str], approx: list[str]) -> Optional[LoraSpec]:
    lora = r.get("lora")
    if not lora:
        return None
    if not isinstance(lora.get("rank"), int):
        missing.append("unstated: lora.rank")
        return None
    targets = lora.get("targets")
    if isinstance(targets, list):
        mlp = any(t in targets for t in ("mlp", "gate_proj", "up_proj", "down_proj"))
        approx.append(f"lora.targets {targets} stated as {'all-linear' if mlp else 'attention'}")
        targets = "all-linear" if mlp else "attention"
    elif targets not in ("attention", "all-linear"):
        missing.append(f"unstated: lora.targets ({targets})")
        return None
    alpha = lora.get("alpha") if isinstance(lora.get("alpha"), (int, float)) else None
    return LoraSpec(rank=lora["rank"], targets=targets, alpha=alpha)


def _blockers(r: dict) -> list[str]:
    """What today's profile has no field for (the estimator engineer's list of new fields)."""
    out = []
    s = r["sharding"]
    if s["kind"] == "megatron-fsdp":
        out.append("not expressible yet: Megatron-FSDP sharding")
    if s.get("sp", 1) != 1:
        out.append("not expressible yet: training.sequence_parallel (Ulysses all-to-all)")
    if r.get("offload"):
        out.append(f"not expressible yet: training.offload ({r['offload']})")
    if "optimizer_in_backward" in r["fused"]:
        out.append("not expressible yet: training.optimizer_in_backward")
    if "bf16 exp_avg" in r["optimizer"]:
        out.append("not expressible yet: training.optimizer_state_dtype (bf16 Adam moments)")
    q = r["quantization"]
    if q != "none" and not q.startswith("nf4"):
        out.append(f"not expressible yet: training.quantization ({q})")
    if r.get("moe_routing") == "token-drop":
        out.append("not expressible yet: MoE token dropping (expert capacity factor)")
    for key, what in (("sequence_length", "sequence length"), ("micro_batch_size", "micro batch size")):
        if not isinstance(r.get(key), int):
            out.append(f"unstated: {what}")
    if r["gpu"] is None and r["measured"].get("memory_limit_gib") is None:
        out.append("unstated: GPU model")
    if r["optimizer"] == "unstated":
        out.append("unstated: optimizer")
    if r["gradient_checkpointing"] == "unstated" and r["framework_as_profile"] not in _NO_RECOMPUTE_BY_DEFAULT:
        out.append("unstated: gradient checkpointing")
    for key in ("zero_stage", "vp", "tp", "pp", "cp", "ep"):
        if s.get(key) is not None and not isinstance(s.get(key), int):
            out.append(f"unstated: sharding.{key}")
    return out


#: set C's attention kernels as training.attention states them (flash / SDPA backends the field does not split
#: are rounded to the family: SDPA's cuDNN and memory-efficient backends are sdpa, FlashAttention 2 and 3 and
#: Transformer Engine's fused attention are flash, flex is sdpa)
_ATTENTION = {"sdpa": "sdpa", "flash2": "flash", "flash3": "flash", "te (cuDNN fused)": "flash", "te (flash)": "flash",
              "sdpa (cudnn backend)": "sdpa", "sdpa (efficient backend)": "sdpa", "sdpa (flash backend)": "sdpa",
              "flex": "sdpa"}
_EXACT_ATTENTION = ("sdpa", "flash2", "sdpa (flash backend)", "te (flash)", "unstated")


def _attention(r: dict) -> Optional[str]:
    """training.attention for a row: its kernel family where the row's stack has that path, else the stack's
    default (None)."""
    from trainstack.profile.kernels import ATTENTION_BY_FRAMEWORK

    kind = _ATTENTION.get(r["attention"])
    return kind if kind in ATTENTION_BY_FRAMEWORK[r["framework_as_profile"]][0] else None


def _fp8_recipe(r: dict) -> Optional[str]:
    recipe = (r.get("fp8_recipe") or "").lower()
    if r["precision"] != "fp8-mixed" or r["framework_as_profile"] == "megatron":
        return None
    return "rowwise" if recipe.startswith("rowwise") else "tensorwise" if recipe.startswith("tensorwise") else None


def _approximations(r: dict) -> list[str]:
    """Stated details today's profile rounds off (kept with the row; not blocking)."""
    out = []
    if r["attention"] not in _EXACT_ATTENTION:
        out.append(f"attention {r['attention']} stated as training.attention {_attention(r) or 'the default'}")
    if r["fp8_recipe"] and _fp8_recipe(r) is None:
        out.append(f"fp8 recipe '{r['fp8_recipe']}' stated as precision fp8-mixed")
    if r["gradient_checkpointing"] == "unstated":
        out.append("gradient checkpointing unstated: taken as off (the stack's default)")
    if r["nodes"] > 1 and not (r.get("network") or {}).get("gbps") and not (r.get("network") or {}).get("gbps_per_gpu"):
        out.append("node network not stated (the estimate's default network applies)")
    if r.get("moe_routing"):
        out.append(f"MoE routing: {r['moe_routing']}")
    if r["fused"]:
        out.append("fused kernels: " + ", ".join(r["fused"]))
    return out


def _loss(r: dict) -> Optional[str]:
    if r.get("loss_as_profile"):
        return r["loss_as_profile"]
    fused = " ".join(r["fused"])
    if "liger" in fused or "chunked_ce" in fused:
        return "chunked"
    return None


def _corpus_row(r: dict) -> Union[CorpusRow, NotExpressible]:
    missing = _blockers(r)
    approx = _approximations(r)
    lora = _lora(r, missing, approx)
    if missing:
        return NotExpressible(r["id"], r["source"], tuple(missing))
    s, m = r["sharding"], r["measured"]
    ckpt = r["gradient_checkpointing"]
    try:
        training = TrainingSpec(
            method=r["method"], precision=r["precision"], optimizer="adamw", micro_batch_size=r["micro_batch_size"],
            sequence_length=r["sequence_length"], gradient_checkpointing=False if ckpt == "unstated" else ckpt,
            lora=lora, zero_stage=s["zero_stage"] if s["kind"] == "zero" else _ZERO[s["kind"]],
            framework=r["framework_as_profile"], loss=_loss(r),
            gradient_accumulation_steps=r["grad_accum"] if isinstance(r["grad_accum"], int) else None,
            expert_parallel=s["ep"], tensor_parallel=s["tp"], pipeline_parallel=s["pp"], context_parallel=s["cp"],
            virtual_pipeline_stages=s["vp"], compile=r["compile"] if isinstance(r["compile"], bool) else None,
            attention=_attention(r), fp8_recipe=_fp8_recipe(r), sharding="hybrid" if s["kind"] == "hsdp" else None)
        arch = Architecture(**r["architecture"])
    except (ValueError, TypeError) as e:   # pydantic's ValidationError is a ValueError
        return NotExpressible(r["id"], r["source"], (f"not expressible yet: {str(e).splitlines()[0]}",))
    net = r.get("network") or {}
    gbps = net.get("gbps") or (net["gbps_per_gpu"] * min(r["gpus"], 8) if net.get("gbps_per_gpu") else None)
    gpu = gpu_named(r["gpu"]) if r["gpu"] else None
    per_node = min(r["gpus"], 8)
    compare = _COMPARE.get(m.get("kind")) if m.get("peak_gib") is not None else None
    category = "QLoRA" if training.method == "qlora" else "multi-GPU / ZeRO / FSDP" if r["gpus"] > 1 else (
        "single GPU H100/H200" if gpu is not None and gpu.architecture == "hopper" else "other single GPU")
    return CorpusRow(r["id"], r["source"], r["framework"], category, arch, training, gpu, r["gpus"], per_node,
                     r["nodes"], gbps, compare, m.get("peak_gib"), m.get("tokens_per_s_per_gpu"), bool(m["oom"]),
                     m.get("memory_limit_gib"), tuple(approx))


def load_set_c() -> tuple[list[CorpusRow], list[NotExpressible]]:
    """Set C (published-set-c.json) in trainstack's types where today's fields can state a row; the rest with
    the fields they would need ("not expressible yet: ...") or the facts their source leaves out ("unstated: ...")."""
    doc = json.loads(SET_C.read_text(encoding="utf-8"))
    rows: list[CorpusRow] = []
    rest: list[NotExpressible] = []
    for r in doc["rows"]:
        got = _corpus_row(r)
        (rows if isinstance(got, CorpusRow) else rest).append(got)
    return rows, rest
