"""Every measured row of every corpus file as one type, with the source it belongs to and its class.

Leave-one-source-out validation (benchmarks/group_validation.py) needs one list of observations in
which each row names the *source* that produced it: rows of one source share a harness, a software
stack and a way of reporting, so their errors are correlated and no row of a scored source may be
in the fit that scores it. A source is a repository (or, for the H200 rows, this project's own
harness); two repositories that publish the same benchmark series are one source:

* NVIDIA/NeMo ``performance_summary.md`` and NVIDIA-NeMo/Megatron-Bridge ``performance-summary-archive.md``
  (the Megatron-Bridge archive continues NeMo's table: same recipes, DGX-H100, Megatron-Core);
* unsloth.ai's benchmark page and unslothai/unsloth's README (the same context-length table).

``cls`` is the error-bar class of a row (GPU generation, framework, method, dense/MoE), the same
function the estimator uses for an estimate (trainstack.sizing.intervals.estimate_class).
"""

from __future__ import annotations

import functools
import json
import math
import re
from typing import NamedTuple, Optional

from benchmarks.calibration_rows import (
    CALIBRATION, HELDOUT, SET_C, CorpusRow, PublishedRow, Row, gpu_named, harness_casts_on_gpu, load_parallel,
    load_published,
    load_rows, load_set_c,
)
from trainstack.catalog.models import GpuModel
from trainstack.models import Architecture
from trainstack.profile import TrainingSpec
from trainstack.sizing.intervals import EstimateClass, estimate_class

H200_SOURCE = "trainstack/h200-harness"
H200 = GpuModel(name="H200", architecture="hopper", memory_gb=141, usable_gib=139.8, memory_bandwidth_gbs=4800,
                bf16_tflops=989, fp16_tflops=989, fp8_tflops=1979, supports_bf16=True, supports_fp8=True,
                sources=("CALIB-H200",))

#: set-C source keys (published-set-c.json ``sources[].key``) -> the source group
_SET_C_GROUP = {
    "fms-fsdp": "foundation-model-stack/fms-fsdp", "torchao-float8": "pytorch/ao",
    "torchtitan-asynctp-2025-06": "pytorch/torchtitan", "ms-swift-megatron-benchmark": "modelscope/ms-swift",
    "ms-swift-qwen3-best-practice": "modelscope/ms-swift", "ms-swift-examples": "modelscope/ms-swift",
    "answerai-fsdp-qlora-benchmarks": "AnswerDotAI/fsdp_qlora", "peft-fsdp-docs": "huggingface/peft",
    "unsloth-readme-2025-01": "unsloth", "torchtune-readme": "pytorch/torchtune",
    "nemo-automodel-perf": "NVIDIA-NeMo/Automodel", "megatron-bridge-perf-archive": "NVIDIA NeMo performance summary",
    "xtuner-megatron-moe-benchmark": "InternLM/xtuner", "xtuner-v01-speed-benchmark": "InternLM/xtuner",
    "xtuner-v01-long-sequence-doc": "InternLM/xtuner", "openrlhf-issue-698": "OpenRLHF/OpenRLHF",
    "llamafactory-issue-5545": "hiyouga/LlamaFactory", "cudnn-frontend-llama32-1b-training": "NVIDIA/cudnn-frontend",
}
#: the same benchmark series published under two names
_SAME_SERIES = {"NVIDIA/NeMo": "NVIDIA NeMo performance summary", "unsloth.ai": "unsloth"}


class Obs(NamedTuple):
    """One measured row. ``compare``: which memory figure it states (allocated | reserved | whole-gpu |
    fit-boundary | None); ``oom``: it ran out of memory (never a residual: the fit rule must not call it
    fitting); ``harness``: the H200 harness's two habits (outputs kept, fp32 build cast on the GPU)."""

    id: str
    source: str
    corpus: str                     # h200 | set-a | set-b | parallel | set-c
    model: str                      # the model's name (leave-one-model-out inside the H200 harness)
    arch: Architecture
    training: TrainingSpec
    gpu: Optional[GpuModel]
    gpus: int
    per_node: int
    nodes: int
    interconnect: str
    network: str
    network_gbps: Optional[float]
    compare: Optional[str]
    measured_gib: Optional[float]
    limit_gib: Optional[float]      # fit-boundary / OOM rows: the memory the boundary is at (else the GPU's usable)
    tokens_per_second: Optional[float]
    oom: bool
    harness: bool
    reserved_gib: Optional[float] = None   # H200 rows: torch.cuda.max_memory_reserved
    fittable: bool = True                  # the corpus allows it in a fit (OOM rows never)

    @property
    def cls(self) -> EstimateClass:
        return estimate_class(self.arch, self.training, self.gpu.architecture if self.gpu else None)

    @property
    def has_speed(self) -> bool:
        return bool(self.tokens_per_second) and self.gpu is not None and self.gpu.bf16_tflops is not None


def source_of_url(url: str) -> str:
    """owner/name of a GitHub URL, else the host; then the series mapping."""
    m = re.match(r"https://github\.com/([^/]+)/([^/#]+)", url)
    key = f"{m.group(1)}/{m.group(2)}" if m else re.sub(r"^https?://([^/]+).*$", r"\1", url)
    return _SAME_SERIES.get(key, key)


def _h200(row: Row) -> Obs:
    return Obs(row.id, H200_SOURCE, "h200", row.model, row.arch, row.training, H200, 1, 1, 1, "none", "none", None,
               "allocated", row.peak_gib, None, row.tokens_per_second, False, True, row.reserved_gib)


def _published(r: PublishedRow, corpus: str) -> Obs:
    return Obs(r.id, source_of_url(r.source), corpus, _model_name(r.id, r.arch), r.arch, r.training, r.gpu, r.gpus,
               r.per_node, r.nodes, r.interconnect, r.network if r.nodes > 1 else "none", r.network_gbps, r.compare,
               r.measured_gib, r.boundary_gib, r.tokens_per_second, False, False)


def _interconnect(gpu: Optional[GpuModel], per_node: int) -> str:
    """Set C's GeForce cards sit on PCIe (Answer.AI: "two 3090s (without NVLink)"); the data-centre parts in
    the corpus are SXM boards on NVSwitch."""
    if per_node <= 1:
        return "none"
    if gpu is not None and gpu.name.startswith("RTX-"):
        return "pcie"
    return "nvswitch"


#: Set-C sources that ran on NVIDIA DGX H100 systems (their pages say so) but state no network: read with the
#: DGX H100's eight 400 Gb/s ConnectX-7 compute-fabric ports per node, as published-parallel-profiles.yaml reads
#: NeMo's DGX rows (DGX_NET, 3200 Gbit/s per node; NVIDIA DGX H100 user guide, "Network ports").
_DGX_H100_SOURCES = ("megatron-bridge-perf-archive", "nemo-automodel-perf")
#: torchao's float8 tables ran on Meta's H100s, the 96 GB / 2.4 TB/s / 500 W part of reference-gpus.yaml's
#: H100-96G: torchao's own roofline for those runs says so (pytorch/ao@36027d82d1ad
#: torchao/testing/training/roofline_utils.py, "NVIDIA H100": "2.4 TB per second, custom to Meta's H100 variant")
_META_H100_SOURCES = ("torchao-float8",)
DGX_H100_NETWORK_GBPS = 3200.0
#: The clock NVIDIA's dense peak figures for GH100 parts (H100 SXM, H200, H800) are quoted at: 989.4 TFLOPS =
#: 132 SMs x 4,096 dense BF16 FLOPs per SM and clock x 1.83 GHz (H100 whitepaper's per-SM rate: twice A100's
#: 2,048, whose 312 TFLOPS = 108 SMs x 2,048 x 1.41 GHz). A row run with the clock locked lower has its
#: peaks scaled by the ratio (HBM bandwidth does not follow the SM clock).
GH100_PEAK_CLOCK_MHZ = 1830.0


@functools.lru_cache(maxsize=1)
def _set_c_extras() -> dict[str, dict]:
    doc = json.loads(SET_C.read_text(encoding="utf-8"))
    return {r["id"]: r for r in doc["rows"]}


def _clocked(gpu: Optional[GpuModel], mhz: Optional[float]) -> Optional[GpuModel]:
    if gpu is None or not mhz or gpu.architecture != "hopper":
        return gpu
    f = mhz / GH100_PEAK_CLOCK_MHZ
    scale = {k: getattr(gpu, k) * f for k in ("bf16_tflops", "fp16_tflops", "fp8_tflops") if getattr(gpu, k)}
    return gpu.model_copy(update={**scale, "name": gpu.name})


def _set_c(r: CorpusRow) -> Obs:
    raw = _set_c_extras()[r.id]
    net = "none" if r.nodes <= 1 else "roce"
    gbps = r.network_gbps
    if r.nodes > 1 and gbps is None and r.source in _DGX_H100_SOURCES:
        gbps = DGX_H100_NETWORK_GBPS
    gpu = _clocked(r.gpu, raw.get("gpu_clock_mhz"))
    if r.source in _META_H100_SOURCES and gpu is not None and gpu.name == "H100":
        gpu = gpu_named("H100-96G")
    return Obs(r.id, _SET_C_GROUP[r.source], "set-c", _model_name(r.id, r.arch), r.arch, r.training, gpu, r.gpus,
               r.per_node, r.nodes, _interconnect(r.gpu, r.per_node), net, gbps, r.compare,
               r.measured_gib, r.memory_limit_gib, r.tokens_per_second, r.oom, False, None, not r.oom)


def _model_name(rid: str, arch: Architecture) -> str:
    return f"{arch.hidden_size}x{arch.num_layers}"


@functools.lru_cache(maxsize=1)
def load_observations() -> tuple[Obs, ...]:
    """Every row of every corpus file that trainstack can state, each once (set A, set B, the parallel
    rows and set C; the H200 calibration and held-out rows are one source)."""
    out = [_h200(r) for r in load_rows(CALIBRATION) + load_rows(HELDOUT)]
    out += [_published(r, "set-a" if r.framework != "llm-foundry" else "set-b") for r in load_published()]
    out += [_published(r, "parallel") for r in load_parallel()]
    rows, _ = load_set_c()
    out += [_set_c(r) for r in rows]
    return tuple(_unique_ids(out))


def _unique_ids(out: list[Obs]) -> list[Obs]:
    """Set B has two llm-foundry rows under one id (125m at 2,048 tokens on 8 A100-80G, micro-batch 40 and
    32: two table lines); the second gets ``#2`` so every observation is named once."""
    seen: dict[str, int] = {}
    unique = []
    for o in out:
        seen[o.id] = seen.get(o.id, 0) + 1
        unique.append(o if seen[o.id] == 1 else o._replace(id=f"{o.id}#{seen[o.id]}"))
    return unique


def sources(obs: tuple[Obs, ...]) -> list[str]:
    return sorted({o.source for o in obs})


def h200_casts_on_gpu(o: Obs) -> bool:
    """The H200 harness builds the model in fp32 on the GPU (see calibration_rows.harness_casts_on_gpu)."""
    return o.harness and harness_casts_on_gpu(Row(o.id, o.model, o.arch, o.training, 0.0, 0.0, 0.0))


def nodes_of(gpus: int, per_node: int) -> int:
    return math.ceil(gpus / max(1, per_node))
