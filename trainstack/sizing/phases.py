"""What is alive on one GPU at each phase of a training step (end of forward, start of backward,
recompute, end of backward), component by component: the maximum over the phases is the peak
(see memory.py for the phases and what the calibration measured)."""

from __future__ import annotations

from typing import Optional

from ..models import Architecture
from ..profile import TrainingSpec
from . import constants as K
from .activations import (
    checkpoint_bytes, eager_keys, final_norm_bytes, full_layer_bytes, lora_layer_bytes, selective_layer_bytes,
    vision_activation_bytes,
)
from .frameworks import DTENSOR_LOSS_PARALLEL_BYTES, KEPT_OUTPUT_BYTES, LOSS_BYTES, framework, loss_mode
from .param_bytes import MIXED, ParamBytes, adapter_bytes, param_bytes, trainable_params
from .parallel import Layout, Stage, expert_degree, micro_batches, shares, stages, tokens_per_gpu
from .shapes import (
    biggest_linear, expert_params, head_params, largest_layer_matmul_params, layer_matmul_params, total_matmul_params,
)


def phase_components(arch: Architecture, t: TrainingSpec, dp: int, keeps_outputs: Optional[bool] = None,
                     lay: Optional[Layout] = None, stage: Optional[Stage] = None) -> dict[str, dict[str, float]]:
    """Bytes alive per component at each phase's high point on one GPU of ``stage`` (default: the
    whole model on one of ``dp`` data-parallel GPUs)."""
    if lay is None:
        lay = Layout(dp=max(1, dp), ep=t.expert_parallel)
    if stage is None:
        stage = stages(arch.num_layers, lay, micro_batches(t, lay))[0]
    blay = param_bytes(arch, t, lay.shard)
    sh = shares(arch, stage)
    L, V = arch.num_layers, arch.vocab_size
    tp = stage.tp
    T = tokens_per_gpu(t, stage) / tp          # sequence parallelism: every activation is split over tp
    A = stage.act_layers                       # layers' activations of one micro-batch alive at once
    zero = t.zero_stage
    shard = lay.shard
    n_train = trainable_params(arch, t)
    lora = t.adapters
    m = micro_batches(t, lay)
    # torch pipelining + FSDP (torchtitan): the stage stays gathered and its gradients unsharded until the
    # last micro-batch (pytorch v2.10.0 torch/distributed/pipelining/stage.py backward_maybe_with_nosync:
    # set_reshard_after_backward(False), set_requires_gradient_sync(False); torchtitan v0.2.2
    # parallelize.py: reshard_after_forward = not pp_enabled)
    pp_gathered = zero >= 3 and lay.pp > 1

    # static: held across the whole step
    shard_s = shard if zero >= 1 else 1
    ep = expert_degree(arch, t, lay)
    f_base = expert_params(arch) / arch.params if ep > 1 else 0.0   # expert share of the held weights
    f_train = 0.0 if lora else f_base                               # adapters are not split

    def split(total: float, frac: float, sharded: bool) -> float:
        """Non-expert bytes sharded over the dp x cp ranks (when ZeRO covers them); expert bytes over ep,
        then over the ranks that hold the same experts."""
        rest = (1 - frac) * total / (shard if sharded else 1)
        return rest + frac * total / ep / ((shard // ep) if sharded else 1)

    n_share = sh.adapters if lora else sh.params
    grad_bytes = blay.grad_per_param
    if pp_gathered and not lora and t.precision in MIXED:
        grad_bytes = 4.0  # FSDP2 accumulates unsharded gradients in its fp32 reduce dtype between micro-batches
    grads = split(n_train * grad_bytes * n_share, f_train, zero >= 2 and not pp_gathered)
    static = {
        "weights": split(_held_weights(arch, t, blay, sh), f_base, zero >= 3),
        "quantization_constants": split(blay.quant_constants * sh.matmul, f_base, zero >= 3),
        "optimizer_states": 0.0 if lora else split(blay.state_bytes * n_share, f_train, zero >= 1),
        "lora_adapters": (blay.adapter_weights + blay.state_bytes) * sh.adapters / shard_s if lora else 0.0,
        "communication_buffers": _comm_buffers(arch, zero, shard, n_train * blay.grad_per_param * n_share),
    }
    if pp_gathered:
        # the stage's 16-bit weights stay gathered (reshard_after_forward off with PP, torchtitan) and
        # gradients accumulate unsharded until the step's reduce-scatter
        static["weights"] += split(2.0 * (arch.params if lora else n_train) * sh.params, f_base, False)
    head = stage.last
    head_copy = 2.0 * head_params(arch) / tp if (blay.autocast and head) else 0.0
    layer_copy = 2.0 * layer_matmul_params(arch) / tp if blay.autocast else 0.0
    layers = stage.layers

    # activations
    keys = eager_keys(t)
    if lora is not None:
        ab = adapter_bytes(t)
        layer = lora_layer_bytes(arch, lora, ab=ab, keys=keys)
        first = layer if t.checkpointing == "full" else lora_layer_bytes(arch, lora, first=True, ab=ab, keys=keys)
    else:
        layer = first = full_layer_bytes(arch, blay, keys)
    if t.checkpointing == "selective":
        layer = selective_layer_bytes(arch, t, blay, layer)
        first = selective_layer_bytes(arch, t, blay, first)
    if not stage.first:
        first = layer
    fin = final_norm_bytes(arch, t, blay) if head else 0
    ck = checkpoint_bytes(arch, blay)
    if t.checkpointing == "full":
        acts = (A * ck + fin) * T
    else:
        acts = ((A - 1) * layer + first + fin) * T
    if stage.first:
        acts += vision_activation_bytes(arch, t)

    temps = _temporaries(arch, t, lay, stage)
    gc = t.checkpointing == "full"
    loss = LOSS_BYTES[loss_mode(t)]
    if tp > 1 and loss_mode(t) == "full" and framework(t).dtensor_loss_parallel:
        loss = DTENSOR_LOSS_PARALLEL_BYTES
    keeps = framework(t).keeps_outputs if keeps_outputs is None else keeps_outputs
    kept = KEPT_OUTPUT_BYTES if keeps else 0.0  # the loop's `out` holds bf16 logits
    VT = V * T if head else 0.0                  # vocabulary-parallel logits: V / tp of them per GPU
    logits_fwd = (loss["forward"] + kept) * VT   # (the previous step's, until `out` is reassigned)
    logits_bwd = (loss["backward"] + kept) * VT
    logits_kept = kept * VT

    def with_static(**parts: float) -> dict[str, float]:
        out = dict(static)
        for k, v in parts.items():
            out[k] = out.get(k, 0.0) + v
        return out

    def grads_part(g: float) -> dict[str, float]:
        return {"lora_adapters": g} if lora else {"gradients": g}

    # with several micro-batches per step (accumulation, pipeline) the gradients of the earlier ones are
    # alive while the later ones run forward and backward
    accumulated = grads if (m > 1 or lay.pp > 1) else 0.0
    phases = {
        "forward": with_static(autocast_weight_copies=layers * layer_copy + head_copy, activations=acts,
                               logits_and_loss=logits_fwd, temporaries=temps["forward"],
                               **grads_part(accumulated)),
        "backward_start": with_static(autocast_weight_copies=(head_copy if gc else layers * layer_copy + head_copy),
                                      activations=acts, logits_and_loss=logits_bwd,
                                      temporaries=temps["forward"], **grads_part(accumulated)),
        "backward_end": with_static(**grads_part(grads), logits_and_loss=logits_kept,
                                    temporaries=temps["backward_end"]),
    }
    if gc:
        # deepest point of the recompute: the top layer (every checkpoint alive, only the LM head's
        # gradient) or the bottom one (one checkpoint, every layer's gradient above it); the memory
        # between them is linear in the layer index. Other micro-batches' checkpoints stay alive.
        shard_g = shard if (zero >= 2 and not pp_gathered) else 1
        per_layer = (n_train / L * sh.adapters * L / max(1, layers) if lora
                     else layer_matmul_params(arch) / tp) * blay.grad_per_param / shard_g
        head_grads = 0.0 if (lora or not head) else head_params(arch) / tp * blay.grad_per_param / shard_g
        others = A - layers                      # checkpoints of the micro-batches in flight behind this one
        top = {"activations": (A * ck + layer) * T, "gradients": head_grads}
        bottom = {"activations": ((others + 1) * ck + layer) * T,
                  "gradients": head_grads + (layers - 1) * per_layer}
        best = max((top, bottom), key=lambda d: d["activations"] + d["gradients"])
        g = max(best["gradients"], accumulated)
        phases["recompute"] = with_static(**grads_part(g), activations=best["activations"],
                                          autocast_weight_copies=layer_copy, logits_and_loss=logits_kept,
                                          temporaries=temps["backward_end"])
    return phases


def _held_weights(arch: Architecture, t: TrainingSpec, blay: "ParamBytes", sh) -> float:
    """The weights one GPU holds before ZeRO: QLoRA packs the decoder matmuls (its share of them) and
    keeps the rest (embedding, head, norms) in 16 or 32 bits."""
    if sh.params == 1.0 and sh.matmul == 1.0:
        return blay.weights
    if t.method == "qlora":
        packed = total_matmul_params(arch) * K.NF4_BYTES_PER_PARAM
        return packed * sh.matmul + (blay.weights - packed) * sh.other
    return blay.weights * sh.params


def _expert_split(arch: Architecture, t: TrainingSpec, lay: Layout) -> float:
    """How much smaller a gathered MoE layer is when each rank holds 1/ep of its experts."""
    ep = expert_degree(arch, t, lay)
    if ep == 1:
        return 1.0
    frac = expert_params(arch) / max(1, arch.matmul_params)
    return 1.0 / ((1 - frac) + frac / ep)


def _comm_buffers(arch: Architecture, zero: int, dp: int, grad_bytes: float) -> float:
    """DDP's gradient buckets (a copy of every gradient) or ZeRO's reduce/all-gather buckets."""
    if dp <= 1:
        return 0.0
    if zero == 0:
        return grad_bytes
    return 2 * arch.hidden_size ** 2 * 4.0  # HF/DeepSpeed "auto": reduce bucket = hidden^2 elements


def _temporaries(arch: Architecture, t: TrainingSpec, lay: Layout, stage: Stage) -> dict[str, float]:
    """Short-lived buffers: cuBLAS workspaces, QLoRA's dequantised weight, ZeRO-3's gathered
    layers (not with pipeline parallelism: the stage stays gathered), the tied embedding's second
    gradient."""
    tp, shard = stage.tp, lay.shard
    biggest = biggest_linear(arch) / tp
    fwd = end = float(K.CUBLAS_WORKSPACE_BYTES)
    if t.method == "qlora":
        fwd += 2.0 * biggest
        end += 2.0 * biggest
    if t.zero_stage >= 3 and shard > 1 and lay.pp == 1:
        # QLoRA shards the packed 4-bit weights (bnb_4bit_quant_storage): they are gathered packed
        per_param = (K.NF4_BYTES_PER_PARAM + K.NF4_CONSTANT_BYTES_PER_PARAM) if t.method == "qlora" else 2.0
        gathered = K.ZERO3_LIVE_LAYERS * largest_layer_matmul_params(arch) / tp * per_param / _expert_split(arch, t, lay)
        fwd += gathered + (2.0 * head_params(arch) / tp if stage.last else 0.0)
        end += gathered
    if t.adapters is None and arch.tie_embeddings and lay.pp == 1:
        # the LM head's gradient waits in autograd's buffer for the embedding's before they are summed
        grad_bytes = param_bytes(arch, t, shard).grad_per_param
        end += head_params(arch) / tp * grad_bytes / (shard if t.zero_stage >= 2 else 1)
    return {"forward": fwd, "backward_end": end}
