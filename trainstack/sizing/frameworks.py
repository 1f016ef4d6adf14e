"""What each training stack keeps in memory and how it runs, as documented defaults.

A profile names its stack (``training.framework``); explicit fields (``training.loss``) override the
stack's default. Each default says where it comes from. ``hf`` is what the H200 calibration measured
(transformers + peft, eager PyTorch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..parallel_degrees import PARALLEL_DEGREES, unsupported_degrees  # noqa: F401 - the degree rules, kept importable here
from ..profile.kernels import ATTENTION_BY_FRAMEWORK, default_attention

if TYPE_CHECKING:
    from ..profile import TrainingSpec


@dataclass(frozen=True)
class Framework:
    loss: str                    # default training.loss
    keeps_outputs: bool          # the training loop holds the step's outputs (logits) across steps
    qlora_upcast: bool           # peft prepare_model_for_kbit_training: non-quantised weights and the residual in fp32
    fused_kernels: bool          # compiled element-wise kernels (norms, rotary, activations): torch.compile
    source: str
    transformer_engine: bool = False  # Transformer Engine layers: fused attention (cuDNN), norm+linear fusions
    fsdp_fp32_params: bool = False    # FSDP2 mixed precision: the sharded parameters are the fp32 master copy
    dtensor_loss_parallel: bool = False  # with tensor parallelism: DTensor loss_parallel (vocabulary-sharded loss)


FRAMEWORKS: dict[str, Framework] = {
    "hf": Framework("full", False, True, False,
                    "transformers ForCausalLMLoss upcasts the logits to fp32 (Trainer.compute_loss drops the outputs); "
                    "peft prepare_model_for_kbit_training "
                    "casts every non-quantised parameter to fp32; eager kernels (the H200 calibration)"),
    "torchtune": Framework("chunked", False, False, False,
                           "torchtune CEWithChunkedOutputLoss (8 chunks, fp32 per chunk); compile off unless the "
                           "config sets it (pytorch/torchtune@14857d88 recipes/configs/llama3_1/"
                           "8B_lora_single_device.yaml: 'compile: False # set it to True for better memory and "
                           "performance')"),
    "torchtitan": Framework("full", False, False, False,
                            "torchtitan cross_entropy over pred.float(), pred deleted before backward; compile off "
                            "by default (training.compile); FSDP2 fully_shard with MixedPrecisionPolicy(param_dtype="
                            "bfloat16, reduce_dtype=float32) over fp32 parameters (torchtitan v0.2.2 73a0e6979dd1 "
                            "models/llama3/infra/parallelize.py, config/job_config.py mixed_precision_param/_reduce); "
                            "loss_parallel() whenever tensor parallelism is on (train.py loss_parallel_enabled)",
                            fsdp_fp32_params=True, dtensor_loss_parallel=True),
    "megatron": Framework("fused", False, False, True,
                          "Megatron-LM/NeMo fused vocab-parallel cross entropy; Transformer Engine fused kernels",
                          transformer_engine=True),
    "llm-foundry": Framework("fused", False, False, False,
                             "llm-foundry MPT loss_fn fused_crossentropy (flash-attn) and flash attention; the "
                             "element-wise kernels run eagerly (Composer compiles only with a compile_config)"),
    "litgpt": Framework("chunked", False, False, False,
                        "litgpt lm_head_chunk_size=128 with chunked_cross_entropy; eager kernels"),
}


def searchable_degrees(t: TrainingSpec) -> frozenset[str]:
    """Degrees the resolver may choose: the framework's, among those the profile leaves unset."""
    can, _ = PARALLEL_DEGREES[t.framework]
    return frozenset(d for d in can if getattr(t, f"{d}_parallel") is None)


def framework(t: TrainingSpec) -> Framework:
    return FRAMEWORKS[t.framework]


def fused_kernels(t: TrainingSpec) -> bool:
    """Element-wise kernels compiled (torch.compile fuses each chain between two matmuls into one kernel):
    ``training.compile`` when given, else the framework's."""
    return FRAMEWORKS[t.framework].fused_kernels if t.compile is None else t.compile


def attention_kind(t: TrainingSpec) -> str:
    """The attention implementation in force: ``training.attention``, else the framework's default
    (trainstack/profile/kernels.py ATTENTION_BY_FRAMEWORK, each with its source)."""
    return t.attention or default_attention(t.framework)


def attention_source(t: TrainingSpec) -> str:
    return ATTENTION_BY_FRAMEWORK[t.framework][2]


def transformer_engine(t: TrainingSpec) -> bool:
    """The stack runs Transformer Engine layers (Megatron-core's default ``transformer_impl``)."""
    return FRAMEWORKS[t.framework].transformer_engine


def loss_mode(t: TrainingSpec) -> str:
    """The loss computation in force: the profile's ``training.loss``, else the framework's."""
    return t.loss or FRAMEWORKS[t.framework].loss


#: Bytes per token of vocabulary-sized tensors alive at each phase, per loss mode (x vocab size):
#: ``forward`` while the loss is computed, ``backward`` at the log-softmax backward. A loop that keeps
#: its outputs (:data:`KEPT_OUTPUT_BYTES`) adds the bf16 logits it holds to every phase.
LOSS_BYTES = {
    # bf16 logits, fp32 upcast, fp32 log-probabilities | log-probs, their grad, the fp32 logits' grad
    "full": {"forward": 10.0, "backward": 12.0},
    # bf16 logits and bf16 log-probabilities | log-probs, their gradient, the logits' gradient
    "bf16": {"forward": 4.0, "backward": 6.0},
    # every chunk's bf16 logits kept, one chunk's fp32 work (1 V a token on average) | logits + their gradient
    "chunked": {"forward": 3.0, "backward": 5.0},
    # bf16 logits, the loss and its gradient computed in place
    "fused": {"forward": 2.0, "backward": 2.0},
}
#: The same under DTensor's ``loss_parallel`` (tensor parallelism, logits sharded over the vocabulary), per
#: token x the vocabulary entries one GPU holds. pytorch 02eef6b8b631c5aefb17838edf8ae153aba45860
#: torch/distributed/tensor/parallel/loss.py: ``_log_softmax`` is decomposed (the fp32 input, ``shifted``
#: and ``exp(shifted)`` beside the bf16 logits: 2 + 3 x 4) and the fused nll/log-softmax backward allocates
#: ``zeros_like(x)``, ``exp(x)`` and their sum beside the saved log-probabilities (4 x 4), where the aten
#: kernels hold 10 and 12 ("full").
DTENSOR_LOSS_PARALLEL_BYTES = {"forward": 14.0, "backward": 16.0}
#: Element-wise HBM traffic of the loss per token (x vocab size): upcast, log-softmax and its gradient.
LOSS_TRAFFIC = {"full": 44.0, "bf16": 22.0, "chunked": 44.0, "fused": 12.0}
#: The previous step's bf16 logits a loop keeps (HF's `out = model(...)`), per token x vocab.
KEPT_OUTPUT_BYTES = 2.0
