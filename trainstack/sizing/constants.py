"""Every number the sizing model uses that is not read from the model's shape or the catalog.

Two kinds: *physical* constants (byte sizes, link speeds, kernel counts), each with where it comes from,
and *fitted* constants, fitted by ``benchmarks/fit_calibration.py`` (benchmarks/fitting.py) on the
measured rows of ``tests/data/calibration/``, each source's weight capped, and frozen here; the
leave-one-source-out harness (benchmarks/group_validation.py) refits them without each source in turn. The memory
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
# One joint least-squares fit (benchmarks/fitting.py) on the relative step time of every corpus row with a
# speed (the H200 harness, sets A, B, C and the parallel rows: 13 sources), each source's weight capped at
# 25 % of the fit (the H200 harness, whose conditions are known exactly, at the cap), a Huber loss (rows more than 15 % off weigh less) and a weak prior on each constant
# (fitting.PRIORS, with sources). Effective values of this model, not kernel micro-benchmarks. How they do
# on sources they were not fitted to: benchmarks/group_validation.py (leave-one-source-out, docs/sizing.md).
#: Fraction of the dense tensor-core peak that the model's matrix multiplies reach, per GPU generation.
MATMUL_EFFICIENCY_BY_ARCH = {"hopper": 0.728, "ampere": 0.812}
MATMUL_EFFICIENCY = MATMUL_EFFICIENCY_BY_ARCH["hopper"]
#: Fraction of the dense FP8 peak the decoder's FP8 matmuls reach (torchao Float8Linear, Transformer Engine),
#: fitted on the corpus's FP8 rows (torchtitan/torchao, NeMo/Megatron-Bridge, llm-foundry amp_fp8): torchao's
#: roofline assumes the BF16 share (0.78, its prior); the measured runs reach less.
FP8_MATMUL_EFFICIENCY_BY_ARCH = {"hopper": 0.653}
#: Fraction of the dense peak flash/SDPA attention's QK^T and AV reach (causal FLOPs counted), per generation:
#: FlashAttention-2 reaches a far smaller share of Hopper's peak than of Ampere's.
ATTENTION_EFFICIENCY_BY_ARCH = {"hopper": 0.289, "ampere": 0.457}
#: Fraction of HBM bandwidth that the element-wise kernels (norms, casts, activations, rotary,
#: softmax, LoRA's fp32 casts) reach.
BANDWIDTH_EFFICIENCY = 0.855
#: Fixed cost per decoder layer and micro-batch (kernel launches, hooks, Python): seconds.
LAYER_OVERHEAD_SECONDS = 0.00105

# ---- throughput: Transformer Engine (Megatron-LM/NeMo), in the same joint fit ---------------------------
#: Share of the dense peak Transformer Engine's fused (cuDNN) attention reaches, causal FLOPs counted.
TE_ATTENTION_EFFICIENCY_BY_ARCH = {"hopper": 0.334}
#: Cost per layer and micro-batch with Transformer Engine layers (seconds): the element-wise work TE
#: fuses into its kernels, FP8 scaling and launches (no separate traffic term).
TE_LAYER_OVERHEAD_SECONDS = 0.00102

# ---- throughput: kernels counted from their source (physical, not fitted; issue 32) -----------------
#: Eager attention (transformers LlamaAttention.forward, huggingface/transformers@002272831fba
#: src/transformers/models/llama/modeling_llama.py): HBM bytes per (token, head, key) of the s x s score
#: matrix. Forward: QK^T writes the bf16 scores (2), the 1/sqrt(d) scale reads and writes them (4), the
#: causal-mask add reads them and the mask and writes (6), softmax(dtype=float32) reads 2 and writes 4 (6),
#: .to(bf16) reads 4 and writes 2 (6), the AV matmul reads the probabilities (2): 26. Backward: dO V^T writes
#: dP (2), P^T dO reads P (2), the cast's backward reads 2 and writes 4 (6), softmax's backward reads the
#: gradient and its output and writes a bf16 gradient (10), the scale's backward (4), dS K and dS^T Q read
#: dS (4): 28. The matmuls' FLOPs run at the matmul efficiency over the full square (no causal skip).
EAGER_SCORE_BYTES = {"forward": 26.0, "backward": 28.0}
#: Eager attention keeps per (token, head, key): softmax's fp32 output (for its backward) and the bf16 copy
#: the AV matmul saves; repeat_kv's expanded keys and values (num_heads, not num_kv_heads) are saved too.
EAGER_SAVED_SCORE_BYTES = 6.0
#: torchao float8 training (pytorch/ao@36027d82d1ad torchao/testing/training/roofline_utils.py
#: get_tensor_memory_traffic_ovhd_s): HBM bytes per element of each GEMM operand to make its float8 copies,
#: without torch.compile (the amax read not fused with the producer) and with it ("fused": the amax fused
#: into the previous op). Roles: input and grad_output (per token), weight (per weight and micro-batch).
FP8_CAST_BYTES = {
    "tensorwise": {"input": (6.0, 4.0), "weight": (8.0, 6.0), "grad_output": (6.0, 4.0)},
    "rowwise": {"input": (8.0, 6.0), "weight": (10.0, 8.0), "grad_output": (8.0, 6.0)},
}
#: A GEMM with a float8 operand reads it in 1 byte and writes bf16 (the same source, get_individual_gemm_time_sympy);
#: torchao reaches the same share of the FP8 peak as of the BF16 peak on large GEMMs ("pct_achievable_gemm_tops"
#: 0.78 for both), so FP8 GEMMs take the fitted matmul efficiency of the generation at the FP8 peak, bounded by
#: their operand traffic (roofline). The LM head stays bf16 (torchtitan's float8 converter filters "output";
#: Transformer Engine converts the transformer layers only).
FP8_GEMM_OPERAND_BYTES = 1.0
#: transformers' eager MoE blocks (Qwen2-MoE, Qwen3-MoE, Mixtral: ``for expert_idx in expert_hit``) run each
#: routed expert as its own ops: the token selection (torch.where, index), gate/up/down projections, the
#: activation, the product, the routing weight and index_add_: about 10 kernels a forward, 30 with the backward;
#: each costs what one of a dense layer's kernels costs (LAYER_OVERHEAD_SECONDS / KERNELS_PER_LAYER).
HF_EXPERT_LOOP_KERNELS = 30.0
#: Kernels of one eager decoder layer forward + backward that LAYER_OVERHEAD_SECONDS is spread over: about 40
#: forward (two RMSNorms of 8 ops, 7 projections, rotary's 12, attention, 2 adds, SiLU and the product) and
#: twice that backward.
KERNELS_PER_LAYER = 120.0

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
