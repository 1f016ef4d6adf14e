"""Every number the sizing model uses that is not read from the model's shape or the catalog.

Two kinds: *physical* constants (byte sizes, link speeds), each with where it comes from, and
*fitted* constants, fitted by ``benchmarks/fit_calibration.py`` on the H200 rows of
``tests/data/calibration/`` and the other measured rows marked for fitting, and frozen here. The memory
model counts its terms tensor by tensor from what PyTorch keeps alive (docs/sizing.md); its fitted
terms are AUTOCAST_KV_EXTRA_BYTES and the caching allocator's envelope. Re-run the fit script after
changing a formula.
"""

from __future__ import annotations

GIB = float(1 << 30)

# ---- memory: allocator and process -------------------------------------------------------
#: The caching allocator (PyTorch defaults) holds more than the allocated peak: freed blocks stay
#: cached. reserved = held tensors + FRAG_DYNAMIC x the step's coming-and-going tensors (no or
#: selective checkpointing), or FRAG_DYNAMIC_CHECKPOINTED x them + FRAG_RECOMPUTE_LAYERS x one layer's
#: activations + FRAG_AUTOCAST_COPIES x the autocast weight copies (full checkpointing re-makes them
#: layer by layer), + BUILD_RESIDUE_KEPT x the blocks a build in fp32 freed that the step cannot
#: reuse. Fitted by benchmarks/fit_calibration.py on the 20 H200 rows' peak_reserved: every
#: prediction at or above the measurement and within 15 % of it, the mean overshoot smallest.
FRAG_DYNAMIC = 1.20
FRAG_DYNAMIC_CHECKPOINTED = 1.15
FRAG_RECOMPUTE_LAYERS = 1.00
FRAG_AUTOCAST_COPIES = 1.90
BUILD_RESIDUE_KEPT = 0.80
#: With PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True segments grow in place and free pages are
#: unmapped: assumed to leave 2 % of the coming-and-going tensors cached. An assumption, NOT
#: measured (no GPU this round): measure it before relying on it.
EXPANDABLE_SLACK = 0.02
#: A plan needs at least this share of the GPU's usable memory left after `required` (estimation
#: error, allocator behaviour the model does not see); profiles set resources.memory_margin_percent.
MIN_MARGIN_FRACTION = 0.03
#: CUDA context, cuBLAS/cuDNN handles: outside the allocator; "about 0.5 to 1 GiB" (calibration
#: README). The upper end, so `required` stays on the safe side.
CUDA_CONTEXT_GIB = 1.0
#: cuBLAS workspaces, allocated through PyTorch's allocator: 32 MiB per handle on Hopper, one
#: handle for the forward thread and one for autograd's backward thread.
CUBLAS_WORKSPACE_BYTES = 2 * 32 * (1 << 20)
#: NCCL's own communication buffers (outside the PyTorch allocator) when more than one GPU trains.
NCCL_BUFFERS_GIB = 0.5

# ---- memory: number formats ---------------------------------------------------------------
#: QLoRA NF4: 4 bits per weight, an fp32 absmax per 64-weight block, double-quantised to 8 bits
#: with an fp32 absmax per 256 blocks: 0.5 + 1/64 + 4/(64*256) bytes = 0.127 bits of overhead.
NF4_BYTES_PER_PARAM = 0.5
NF4_CONSTANT_BYTES_PER_PARAM = 1 / 64 + 4 / (64 * 256)
#: bitsandbytes 8-bit optimizer states: 1 byte per element plus an fp32 absmax per 256 (blockwise).
ADAM8BIT_BYTES_PER_STATE = 1 + 4 / 256
#: peft keeps LoRA adapters in fp32 even on a bf16 base (autocast_adapter_dtype=True).
ADAPTER_BYTES = 4
#: ZeRO-3 holds about two layers' gathered weights at once (the current one and the prefetch).
ZERO3_LIVE_LAYERS = 2

# ---- memory: fitted ------------------------------------------------------------------------
#: Under autocast, without checkpointing, each layer keeps 8 bytes per key/value element per token
#: more than the op-by-op count (fp32-sized copies of k and v; the op that keeps them is not
#: identified). Fitted on the three such calibration rows (c01, c09, c11: 4.1, 1.0 and 8.2 kB per
#: token and layer beyond the count against 8 x kv_dim = 4.1, 1.0 and 8.2 kB); held-out h07 agrees.
AUTOCAST_KV_EXTRA_BYTES = 8

# ---- throughput: fitted (benchmarks/fit_calibration.py; a test checks these are the fit) -----
# Least squares on the relative step-time error of the 12 H200 calibration rows (weight 6) and the
# measured rows of other stacks marked `fit` (set A's profiles; every second llm-foundry row), each group weighing
# the same. Effective values of this model, not kernel micro-benchmarks.
#: Fraction of the dense tensor-core peak that the model's matrix multiplies reach, per GPU generation.
MATMUL_EFFICIENCY_BY_ARCH = {"hopper": 0.815, "ampere": 0.931}
MATMUL_EFFICIENCY = MATMUL_EFFICIENCY_BY_ARCH["hopper"]
#: Fraction of the dense peak flash attention's QK^T and AV reach (causal FLOPs counted), per generation:
#: FlashAttention-2 reaches a far smaller share of Hopper's peak than of Ampere's.
ATTENTION_EFFICIENCY_BY_ARCH = {"hopper": 0.169, "ampere": 0.318}
#: Fraction of HBM bandwidth that the element-wise kernels (norms, casts, activations, rotary,
#: softmax, LoRA's fp32 casts) reach.
BANDWIDTH_EFFICIENCY = 0.826
#: Share of that element-wise traffic left when the stack fuses or compiles those kernels
#: (torchtitan, llm-foundry, Megatron/NeMo, torchtune).
FUSED_TRAFFIC = 0.937
#: Fixed cost per decoder layer and micro-batch (kernel launches, hooks, Python): seconds.
LAYER_OVERHEAD_SECONDS = 0.00163

# ---- throughput: Transformer Engine (Megatron-LM/NeMo), fitted in the second stage ------------------
# benchmarks/fit_calibration.py holds the constants above fixed and fits these on the NeMo performance
# table rows of tests/data/calibration/ marked fit (Megatron-core, FP8, DGX H100); a test checks they are
# the fit. The H200 rows do not move.
#: Share of the dense peak Transformer Engine's fused (cuDNN) attention reaches, causal FLOPs counted.
TE_ATTENTION_EFFICIENCY_BY_ARCH = {"hopper": 0.171}
#: Cost per layer and micro-batch with Transformer Engine layers (seconds): the element-wise work TE
#: fuses into its kernels, FP8 scaling and launches (no separate traffic term).
TE_LAYER_OVERHEAD_SECONDS = 0.00083

# ---- throughput: communication (assumptions, not calibrated) --------------------------------
#: Effective all-reduce bus bandwidth per GPU inside one node, GB/s (NCCL busbw order of
#: magnitude: NVLink 4 / NVSwitch on Hopper about 360, NVLink 3 on Ampere about 230, PCIe about 20).
INTRA_NODE_GBPS = {"hopper": 360.0, "blackwell": 720.0, "ampere": 230.0, "ada": 20.0, "volta": 120.0}
NVLINK_DEFAULT_GBPS = 150.0
PCIE_GBPS = 20.0
#: Node network when the instance type does not say (Gbit/s): eRDMA and TCP.
DEFAULT_NETWORK_GBITS = {"erdma": 200.0, "roce": 400.0, "tcp": 32.0}
#: Achieved fraction of the nominal network bandwidth (eRDMA/RoCE vs kernel TCP).
NETWORK_EFFICIENCY = {"erdma": 0.8, "roce": 0.85, "tcp": 0.5}
#: Share of the backward pass under which gradient communication hides (DDP/ZeRO bucketing); also the
#: share of attention compute under which context parallelism's K/V exchange hides.
COMM_OVERLAP = 0.8
#: Share of tensor parallelism's all-gathers and reduce-scatters left on the critical path.
TP_COMM_EXPOSED = 1.0
#: Share of the GPU's dense BF16 peak the calibration GPU (H200) runs the model FLOPs at is
#: assumed to carry over to other GPUs; their memory bandwidth is used where the catalog has it.
REFERENCE_GPU = "H200"
