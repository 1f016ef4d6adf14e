"""Training speed: matmul FLOPs at the tensor-core peak plus element-wise traffic at HBM speed.

One step on one GPU takes ``flops / (peak * MATMUL_EFFICIENCY) + bytes / (bandwidth *
BANDWIDTH_EFFICIENCY)``: the matrix multiplies (6N-style, from the exact shape, plus causal
attention and the LM head) are compute-bound, while norms, casts, rotary embeddings, SwiGLU's
products, the fp32 softmax over the vocabulary and LoRA's fp32 adapter casts are memory-bound.
That second term is why small models with large vocabularies and LoRA run at a lower model-FLOPs
utilisation than big full fine-tunes. The two efficiencies are the only fitted constants
(constants.py). Data parallelism adds the exposed part of a ring all-reduce of the gradients.
"""

from __future__ import annotations

import functools
from typing import Optional

from pydantic import BaseModel, ConfigDict, Field

from ..architecture import Architecture
from ..catalog.models import GpuModel
from ..profile import TrainingSpec
from . import constants as K
from .memory import MIXED, layout, trainable_params
from .shapes import head_params, layer_matmul_params, lora_params, lora_shapes


class ThroughputEstimate(BaseModel):
    """Speed of one training layout on one GPU model."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gpu: str
    gpus: int
    tokens_per_second_per_gpu: Optional[float] = Field(None, description="None when the GPU's TFLOPS are unknown")
    tokens_per_second: Optional[float] = Field(None, description="Whole cluster")
    step_seconds: Optional[float] = None
    compute_seconds: Optional[float] = Field(None, description="Matmuls + element-wise work of one step")
    communication_seconds: Optional[float] = Field(None, description="Exposed (not overlapped) gradient sync")
    scaling_efficiency: Optional[float] = Field(None, description="Per-GPU speed vs one GPU alone")
    flops_per_token: float = Field(description="Model FLOPs per token (forward, backward, recompute)")
    mfu: Optional[float] = Field(None, description="Model FLOPs utilisation of the dense peak")
    peak_tflops: Optional[float] = None
    labels: tuple[str, ...] = ()


# ---- FLOPs ---------------------------------------------------------------------------------

def flops_per_token(arch: Architecture, t: TrainingSpec) -> dict[str, float]:
    """Model FLOPs per token: ``linear`` (matmuls with weights) and ``attention`` (QK^T and AV).

    Forward is 2 FLOPs per weight; backward 4 (input and weight gradients), only 2 for a frozen
    LoRA/QLoRA base (no weight gradient); gradient checkpointing recomputes the layers' forward.
    Causal attention costs 2 * s * q_dim per token and layer forward (half of the full square).
    """
    L, s = arch.num_layers, t.sequence_length
    body = L * layer_matmul_params(arch)
    head = head_params(arch)
    adapters = lora_params(arch, t.adapters)
    attn_fwd = 2.0 * L * s * arch.q_dim
    frozen = t.adapters is not None
    linear = 2.0 * (body + head + adapters)                          # forward
    linear += (2.0 * (body + head) + 4.0 * adapters) if frozen else 4.0 * (body + head)
    attention = 3.0 * attn_fwd
    if t.gradient_checkpointing:
        linear += 2.0 * (body + adapters)
        attention += attn_fwd
    return {"linear": linear, "attention": attention}


# ---- element-wise HBM traffic ----------------------------------------------------------------

def elementwise_bytes_per_token(arch: Architecture, t: TrainingSpec) -> float:
    """Bytes moved per token by memory-bound kernels (forward x 3 for forward + backward)."""
    lay = layout(arch, t, 1)
    h, inter, V, L = arch.hidden_size, arch.intermediate_size, arch.vocab_size, arch.num_layers
    a = lay.residual
    cast_in = 6 if a == 2 else 0                      # RMSNorm's upcast and downcast of a 16-bit input
    norm = 2 * cast_in + 8 + 4 + 8 + 2 * a            # + pow, mean, scale, weight: per element of h
    per_layer = 2 * norm * h
    per_layer += (38 if lay.autocast else 22) * (arch.q_dim + arch.kv_dim)  # rotary (fp32 under autocast)
    per_layer += 2 * (2 * a + 2) * h                  # two residual adds
    per_layer += 10 * inter                           # SiLU and the gate * up product
    if lay.autocast:
        per_layer += 5 * 6 * h                        # a 16-bit cast of the normed input per projection
    if t.adapters is not None:                        # fp32 cast, adapter, scale, add, downcast
        per_layer += sum(10 * i + 28 * o for i, o in lora_shapes(arch, t.adapters.targets))
    passes = 3 + (1 if t.gradient_checkpointing else 0)
    loss = 44 * V                                     # upcast, log-softmax and its gradient over V
    return L * per_layer * passes + loss


def per_step_bytes(arch: Architecture, t: TrainingSpec) -> float:
    """Traffic paid once per optimizer step: the optimizer, autocast weight casts, NF4 unpacking."""
    lay = layout(arch, t, 1)
    n = trainable_params(arch, t)
    w = 4 if (t.adapters is not None or t.precision in MIXED) else 2  # bytes per trainable weight
    state = {"adamw": 2 * 2 * w, "adamw-8bit": 2 * 2, "sgd": 2 * w, "adafactor": 0}[t.optimizer]
    total = n * (2 * w + lay.grad_per_param + state)
    body = arch.num_layers * layer_matmul_params(arch)
    if lay.autocast:
        casts = 1 + (1 if t.gradient_checkpointing else 0)
        total += 6.0 * (body * casts + head_params(arch)) + 6.0 * (body + head_params(arch))
    if t.method == "qlora":
        total += 2.5 * body * (3 if t.gradient_checkpointing else 2)
    return total


# ---- the estimate ----------------------------------------------------------------------------

def dense_tflops(gpu: GpuModel, t: TrainingSpec) -> tuple[Optional[float], Optional[float], list[str]]:
    """(matmul peak, attention peak, labels) in TFLOPS for the training precision."""
    labels: list[str] = []
    base = gpu.bf16_tflops
    if base is None and gpu.fp16_tflops is not None:
        base = gpu.fp16_tflops
        labels.append(f"{gpu.name} has no BF16 figure: its dense FP16 {base:g} TFLOPS is used")
    if base is None:
        return None, None, [f"no dense TFLOPS known for {gpu.name}: speed unknown"]
    linear = base
    if t.precision == "fp8-mixed":
        if gpu.fp8_tflops:
            linear = gpu.fp8_tflops
            labels.append("FP8 matmuls assumed to reach the same share of the FP8 peak as BF16 does "
                          "of the BF16 peak (not calibrated)")
        else:
            labels.append(f"{gpu.name} has no FP8: matmuls counted at its 16-bit peak")
    return linear, base, labels


def throughput_estimate(arch: Architecture, training: TrainingSpec, gpu: GpuModel, gpus_per_node: int = 1,
                        nodes: int = 1, interconnect: str = "nvlink", network: str = "erdma",
                        network_gbps: Optional[float] = None) -> ThroughputEstimate:
    """Tokens per second of ``nodes`` x ``gpus_per_node`` data-parallel GPUs of model ``gpu``."""
    return _throughput(arch, training, gpu, max(1, int(gpus_per_node)), max(1, int(nodes)),
                       interconnect, network, network_gbps)


@functools.lru_cache(maxsize=8192)
def _throughput(arch: Architecture, t: TrainingSpec, gpu: GpuModel, per_node: int, nodes: int,
                interconnect: str, network: str, network_gbps: Optional[float]) -> ThroughputEstimate:
    gpus = per_node * nodes
    fl = flops_per_token(arch, t)
    total_flops = fl["linear"] + fl["attention"]
    linear_peak, attn_peak, labels = dense_tflops(gpu, t)
    if gpu.name != K.REFERENCE_GPU:
        labels.append(f"speed on {gpu.name} scaled from the H200 calibration by its dense TFLOPS and "
                      "memory bandwidth (assumption)")
    if linear_peak is None or attn_peak is None:
        return ThroughputEstimate(gpu=gpu.name, gpus=gpus, flops_per_token=total_flops, labels=tuple(labels))
    bandwidth = gpu.memory_bandwidth_gbs
    if bandwidth is None:
        bandwidth = 4800.0 * linear_peak / 989.0
        labels.append(f"memory bandwidth of {gpu.name} unknown: assumed in proportion to its TFLOPS")
    tokens = t.micro_batch_size * t.sequence_length
    compute = (tokens * (fl["linear"] / (linear_peak * 1e12) + fl["attention"] / (attn_peak * 1e12))
               / K.MATMUL_EFFICIENCY)
    memory = (tokens * elementwise_bytes_per_token(arch, t) + per_step_bytes(arch, t)) / (
        bandwidth * 1e9 * K.BANDWIDTH_EFFICIENCY)
    step_one = compute + memory
    comm = 0.0
    if gpus > 1:
        sync, comm_labels = _sync_seconds(arch, t, gpu, per_node, nodes, interconnect, network, network_gbps)
        labels += comm_labels
        backward = step_one * 2 / 3
        comm = max(sync - K.COMM_OVERLAP * min(sync, backward), 0.0)
    step = step_one + comm
    per_gpu = tokens / step
    return ThroughputEstimate(
        gpu=gpu.name, gpus=gpus, tokens_per_second_per_gpu=round(per_gpu, 1),
        tokens_per_second=round(per_gpu * gpus, 1), step_seconds=round(step, 6),
        compute_seconds=round(step_one, 6), communication_seconds=round(comm, 6),
        scaling_efficiency=round(step_one / step, 4), flops_per_token=total_flops,
        mfu=round(per_gpu * total_flops / (attn_peak * 1e12), 4), peak_tflops=attn_peak, labels=tuple(labels))


def _sync_seconds(arch: Architecture, t: TrainingSpec, gpu: GpuModel, per_node: int, nodes: int,
                  interconnect: str, network: str, network_gbps: Optional[float]) -> tuple[float, list[str]]:
    """Hierarchical ring all-reduce of the gradients: inside the node, then across nodes.

    A ring all-reduce moves 2(n-1)/n of the buffer through every link. ZeRO-1/2 reduce-scatter
    gradients and all-gather weights (the same volume); ZeRO-3 gathers weights again for the
    backward (1.5x).
    """
    lay = layout(arch, t, per_node * nodes)
    grad_bytes = trainable_params(arch, t) * lay.grad_per_param
    volume = grad_bytes * (1.5 if t.zero_stage >= 3 else 1.0)
    if t.zero_stage >= 3 and t.adapters is not None:
        volume += arch.params * 2.0  # the frozen base is gathered too
    labels = ["multi-GPU speed uses a ring all-reduce model of gradient sync (not calibrated)"]
    seconds = 0.0
    if per_node > 1:
        if interconnect in ("nvlink", "nvswitch"):
            bus = K.INTRA_NODE_GBPS.get(gpu.architecture, K.NVLINK_DEFAULT_GBPS)
        else:
            bus = K.PCIE_GBPS
            labels.append(f"GPUs inside a node talk over PCIe ({interconnect}): about {bus:g} GB/s")
        seconds += 2 * (per_node - 1) / per_node * volume / (bus * 1e9)
    if nodes > 1:
        kind = network if network in K.NETWORK_EFFICIENCY else "tcp"
        if kind != network:
            labels.append(f"node network {network!r}: assumed TCP")
        gbits = network_gbps or K.DEFAULT_NETWORK_GBITS[kind]
        if network_gbps is None:
            labels.append(f"node network bandwidth unknown: assumed {gbits:g} Gbit/s {kind}")
        node_bw = gbits / 8 * 1e9 * K.NETWORK_EFFICIENCY[kind]
        seconds += 2 * (nodes - 1) / nodes * volume / node_bw
    return seconds, labels
