"""Each memory term against a hand calculation for one small shape, and the phase logic.

The shape (``TINY``): hidden 64, 2 layers, 4 heads of 16 (q_dim 64), 2 KV heads (kv_dim 32),
SwiGLU width 128, vocabulary 1000, tied embeddings. By hand: one layer's linears are
q 64x64 + k 64x32 + v 64x32 + o 64x64 + gate/up/down 3 x 64x128 = 36,864 weights, plus two
RMSNorm vectors (128): 36,992; the model is 64,000 (embedding) + 2 x 36,992 + 64 = 138,048.
"""

from __future__ import annotations

import pytest

from trainstack.architecture import Architecture, presets
from trainstack.profile import LoraSpec, TrainingSpec
from trainstack.sizing import constants as K
from trainstack.sizing import memory_estimate
from trainstack.sizing.phases import phase_components
from trainstack.sizing.shapes import lora_params

TINY = Architecture(hidden_size=64, num_layers=2, num_attention_heads=4, num_kv_heads=2,
                    intermediate_size=128, vocab_size=1000, tie_embeddings=True)
P = 138_048
LAYER_LINEAR = 36_864
B, S = 2, 16  # micro-batch x sequence
T = B * S


def spec(**kw) -> TrainingSpec:
    base = dict(micro_batch_size=B, sequence_length=S, precision="bf16")
    base.update(kw)
    return TrainingSpec(**base)


def phases(t: TrainingSpec, dp: int = 1) -> dict[str, dict[str, float]]:
    return phase_components(TINY, t, dp)


def test_tiny_shape_parameter_count():
    assert TINY.params == P


# ---- weights, gradients, optimizer states --------------------------------------------------

@pytest.mark.parametrize("precision, optimizer, weights, grads, states", [
    ("bf16", "adamw", 2 * P, 2 * P, 4 * P),                        # bf16 weights, grads and both states
    ("bf16-mixed", "adamw", 4 * P, 4 * P, 8 * P),                  # fp32 master, fp32 grads, fp32 states
    ("fp16-mixed", "adamw", 4 * P, 4 * P, 8 * P),
    ("bf16", "sgd", 2 * P, 2 * P, 2 * P),                          # one momentum buffer
    ("bf16", "adamw-8bit", 2 * P, 2 * P, 2 * (1 + 4 / 256) * P),   # 8-bit states + fp32 absmax per 256
])
def test_weights_gradients_states_by_precision_and_optimizer(precision, optimizer, weights, grads, states):
    end = phases(spec(precision=precision, optimizer=optimizer))["backward_end"]
    assert end["weights"] == pytest.approx(weights)
    assert end["gradients"] == pytest.approx(grads)
    assert end["optimizer_states"] == pytest.approx(states)


def test_adafactor_keeps_factored_fp32_statistics():
    # rows + columns per matrix: per layer (64+64) + 2 x (64+32) + (64+64) + 3 x (64+128) = 1024;
    # the tied embedding 1000+64; vectors: 2 norms per layer + the final norm = 5 x 64
    elems = 2 * 1024 + (1000 + 64) + 5 * 64
    end = phases(spec(optimizer="adafactor"))["backward_end"]
    assert end["optimizer_states"] == pytest.approx(4 * elems)


def test_autocast_keeps_a_bf16_copy_of_every_matmul_weight_during_forward():
    fwd = phases(spec(precision="bf16-mixed"))["forward"]
    assert fwd["autocast_weight_copies"] == pytest.approx(2 * (2 * LAYER_LINEAR + 1000 * 64))
    # pure bf16 has nothing to copy
    assert phases(spec())["forward"]["autocast_weight_copies"] == 0


def test_checkpointing_frees_layer_copies_after_forward_but_not_the_lm_head_copy():
    start = phases(spec(precision="bf16-mixed", gradient_checkpointing=True))["backward_start"]
    assert start["autocast_weight_copies"] == pytest.approx(2 * 1000 * 64)


# ---- LoRA and QLoRA ----------------------------------------------------------------------------

def test_lora_adapter_parameters_follow_the_real_target_shapes():
    # rank x (in + out): attention q 64+64, k 64+32, v 64+32, o 64+64 = 448 per layer
    assert lora_params(TINY, LoraSpec(rank=8, targets="attention")) == 2 * 8 * 448
    # all-linear adds gate 64+128, up 64+128, down 128+64 = 576
    assert lora_params(TINY, LoraSpec(rank=8, targets="all-linear")) == 2 * 8 * (448 + 576)


def test_lora_adapters_are_fp32_with_their_gradients_and_adamw_states():
    n = 2 * 8 * 448
    t = spec(method="lora", lora=LoraSpec(rank=8, targets="attention"))
    p = phases(t)
    assert p["backward_start"]["weights"] == pytest.approx(2 * P)           # frozen bf16 base
    assert p["backward_start"]["lora_adapters"] == pytest.approx(n * (4 + 8))  # weights + 2 fp32 states
    assert p["backward_end"]["lora_adapters"] == pytest.approx(n * (4 + 8 + 4))  # + fp32 gradients
    assert p["backward_end"].get("gradients", 0) == 0 and p["backward_end"]["optimizer_states"] == 0


def test_qlora_packs_the_decoder_linears_in_nf4_with_blockwise_constants():
    t = spec(method="qlora", lora=LoraSpec(rank=8))
    start = phases(t)["backward_start"]
    packed = 2 * LAYER_LINEAR
    # peft (framework hf) upcasts the embedding, head and norms to fp32; torchtune keeps them bf16
    assert start["weights"] == pytest.approx(packed * 0.5 + (P - packed) * 4)
    tune = phases(spec(method="qlora", lora=LoraSpec(rank=8), framework="torchtune"))["backward_start"]
    assert tune["weights"] == pytest.approx(packed * 0.5 + (P - packed) * 2)
    # 64-weight blocks: an 8-bit absmax per block + an fp32 absmax per 256 blocks = 0.127 bits/weight
    assert start["quantization_constants"] == pytest.approx(packed * (1 / 64 + 4 / (64 * 256)))
    assert K.NF4_CONSTANT_BYTES_PER_PARAM * 8 == pytest.approx(0.127, abs=0.001)


# ---- activations ----------------------------------------------------------------------------------

def test_full_bf16_activations_per_layer_and_token():
    # norms: fp32 input 4h + normalised 2h + shared output 2h, twice = 16h = 1024
    # attention: q, k, v, out in bf16 = 2*(2*64 + 2*32) = 384, + fp32 log-sum-exp 4 x 4 heads = 16
    # SwiGLU: gate, act, up, product in bf16 = 8 x 128 = 1024;   total 2448 per layer
    # final norm 8h = 512;   2 layers x 2448 + 512 = 5408 bytes per token
    start = phases(spec())["backward_start"]
    assert start["activations"] == pytest.approx(5408 * T)


def test_autocast_activations_keep_fp32_residuals_and_a_cast_per_projection():
    # norms: fp32 input 4h + fp32 normalised 4h, twice = 16h; a bf16 cast per consumer: 5 x 2h
    # = 26h = 1664; attention 400; SwiGLU 1024; fitted autocast k/v term 8 x kv_dim = 256
    # per layer 3344; final norm 4h + 4h + 2h = 640;   2 x 3344 + 640 = 7328
    start = phases(spec(precision="bf16-mixed"))["backward_start"]
    assert start["activations"] == pytest.approx(7328 * T)


def test_fp8_keeps_its_matmul_inputs_in_one_byte():
    # as autocast, but the five projection inputs and down_proj's input are fp8 copies:
    # norms 16h + 5 x 1h = 1344; attention 400; SwiGLU 3 x 2I + 1I = 896; k/v term 256 -> 2896;
    # final norm 4h + 4h + 1h = 576;   2 x 2896 + 576 = 6368
    start = phases(spec(precision="fp8-mixed"))["backward_start"]
    assert start["activations"] == pytest.approx(6368 * T)


def test_gradient_checkpointing_keeps_only_layer_inputs():
    # bf16 residual stream 2h per layer + the final norm 8h
    start = phases(spec(gradient_checkpointing=True))["backward_start"]
    assert start["activations"] == pytest.approx((2 * 2 * 64 + 512) * T)
    # ... and the recompute holds one full layer on top of the inputs
    rec = phases(spec(gradient_checkpointing=True))["recompute"]
    assert rec["activations"] in (pytest.approx((2 * 128 + 2448) * T), pytest.approx((128 + 2448) * T))


def test_lora_activations_keep_fp32_adapter_inputs_and_no_frozen_linear_inputs():
    # frozen norms keep their fp32 input only: 2 x 4h = 512; each adapter an fp32 copy of its
    # input + lora_A's fp32 output: 4 x 4 x (64 + 8) = 1152; attention 400; SiLU/product keep
    # gate, act and up: 6 x 128 = 768;   layer 2832.  The first layer's first norm needs no
    # gradient (2832 - 256); the final norm keeps its fp32 input (256).
    t = spec(method="lora", lora=LoraSpec(rank=8, targets="attention"))
    start = phases(t)["backward_start"]
    assert start["activations"] == pytest.approx((2832 + 2576 + 256) * T)


def test_logits_and_loss_over_the_full_vocabulary():
    # a loop that keeps its outputs (the calibration harness): the previous and current bf16 logits
    p = phase_components(TINY, spec(), 1, keeps_outputs=True)
    # forward: previous and current bf16 logits, fp32 upcast, fp32 log-probs = (2+2+4+4) V
    assert p["forward"]["logits_and_loss"] == pytest.approx(12 * 1000 * T)
    # backward start: bf16 logits, log-probs, their gradient, fp32 logits gradient = (2+4+4+4) V
    assert p["backward_start"]["logits_and_loss"] == pytest.approx(14 * 1000 * T)
    assert p["backward_end"]["logits_and_loss"] == pytest.approx(2 * 1000 * T)
    # a Trainer-style loop drops them: 2 V less in every phase
    q = phases(spec())
    assert q["forward"]["logits_and_loss"] == pytest.approx(10 * 1000 * T)
    assert q["backward_end"]["logits_and_loss"] == 0


@pytest.mark.parametrize("loss, forward, backward", [("bf16", 4, 6), ("chunked", 3, 5), ("fused", 2, 2)])
def test_other_loss_computations_hold_less_of_the_vocabulary(loss, forward, backward):
    p = phases(spec(loss=loss))
    assert p["forward"]["logits_and_loss"] == pytest.approx(forward * 1000 * T)
    assert p["backward_start"]["logits_and_loss"] == pytest.approx(backward * 1000 * T)
    torchtune = phases(spec(framework="torchtune"))  # chunked by default
    assert torchtune["backward_start"]["logits_and_loss"] == pytest.approx(5 * 1000 * T)


# ---- ZeRO and data parallelism --------------------------------------------------------------------

@pytest.mark.parametrize("stage, weights, grads, states", [
    (1, 2 * P, 2 * P, 12 * P / 4),     # 16-bit weights and grads; fp32 master + 2 states sharded
    (2, 2 * P, 2 * P / 4, 12 * P / 4),
    (3, 2 * P / 4, 2 * P / 4, 12 * P / 4),
])
def test_zero_stages_shard_states_then_gradients_then_weights(stage, weights, grads, states):
    end = phases(spec(precision="bf16-mixed", zero_stage=stage), dp=4)["backward_end"]
    assert end["weights"] == pytest.approx(weights)
    assert end["gradients"] == pytest.approx(grads)
    assert end["optimizer_states"] == pytest.approx(states)


def test_fsdp2_keeps_fp32_sharded_parameters_as_the_master_copy():
    # torchtitan (FSDP2 MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)): the fp32 shards are what the
    # optimizer steps, with no 16-bit copy beside them: 4 + 8 bytes per parameter sharded, against DeepSpeed's
    # 2 + 4 + 8; the gradient shards are fp32 (reduced in fp32)
    titan = phases(spec(precision="bf16-mixed", zero_stage=3, framework="torchtitan"), dp=4)["backward_end"]
    assert titan["weights"] == pytest.approx(4 * P / 4)
    assert titan["optimizer_states"] == pytest.approx(8 * P / 4)
    assert titan["gradients"] == pytest.approx(4 * P / 4)
    ds = phases(spec(precision="bf16-mixed", zero_stage=3), dp=4)["backward_end"]
    held = ("weights", "optimizer_states")
    assert sum(ds[k] for k in held) - sum(titan[k] for k in held) == pytest.approx(2 * P / 4)
    # pure bf16 training keeps its bf16 shards: nothing changes
    pure = phases(spec(zero_stage=3, framework="torchtitan"), dp=4)["backward_end"]
    assert pure["weights"] == pytest.approx(2 * P / 4)


def test_ddp_without_zero_adds_a_bucket_copy_of_the_gradients():
    end = phases(spec(), dp=8)["backward_end"]
    assert end["communication_buffers"] == pytest.approx(2 * P)
    assert end["weights"] == pytest.approx(2 * P)  # nothing sharded


def test_zero3_needs_less_per_gpu_the_more_gpus_share_it():
    arch = presets()["llama-3-8b"].architecture
    t = TrainingSpec(precision="bf16-mixed", micro_batch_size=1, sequence_length=2048,
                     gradient_checkpointing=True, zero_stage=3)
    peaks = [memory_estimate(arch, t, n).peak_gib_per_gpu for n in (2, 4, 8, 16)]
    assert peaks == sorted(peaks, reverse=True)


# ---- peak, required ---------------------------------------------------------------------------------

def test_peak_is_the_largest_phase_not_the_sum_of_everything():
    t = spec(precision="bf16-mixed")
    est = memory_estimate(TINY, t)
    p = phases(t)
    totals = {k: sum(v.values()) / K.GIB for k, v in p.items()}
    assert est.peak_phase == max(totals, key=totals.get)
    assert est.peak_gib_per_gpu == pytest.approx(max(totals.values()), abs=1e-3)
    everything = (p["backward_end"]["gradients"] + sum(p["backward_start"].values())) / K.GIB
    assert est.peak_gib_per_gpu < everything
    assert sum(est.breakdown_gib.values()) == pytest.approx(est.peak_gib_per_gpu, abs=0.01)


def test_required_is_reserved_plus_cuda_context_and_nccl_buffers():
    arch = presets()["llama-3.2-1b"].architecture
    t = TrainingSpec(precision="bf16", micro_batch_size=4, sequence_length=1024)
    one = memory_estimate(arch, t)
    assert one.required_gib_per_gpu == pytest.approx(one.reserved_gib_per_gpu + 1.0, abs=0.01)
    two = memory_estimate(arch, t.model_copy(update={"zero_stage": 1}), 2)
    assert two.required_gib_per_gpu == pytest.approx(two.reserved_gib_per_gpu + 1.5, abs=0.01)


def test_reserved_is_held_tensors_plus_a_share_of_the_transient_ones_by_hand():
    arch = presets()["llama-3.2-1b"].architecture
    t = TrainingSpec(precision="bf16", micro_batch_size=4, sequence_length=1024)
    est = memory_estimate(arch, t)
    held = sum(est.breakdown_gib[k] for k in ("weights", "optimizer_states"))
    assert est.reserved_gib_per_gpu == pytest.approx(held + K.FRAG_DYNAMIC * (est.peak_gib_per_gpu - held), abs=0.01)
    ckpt = memory_estimate(arch, t.model_copy(update={"gradient_checkpointing": True}))
    assert ckpt.reserved_gib_per_gpu - ckpt.peak_gib_per_gpu > (K.FRAG_DYNAMIC_CHECKPOINTED - 1) * (
        ckpt.peak_gib_per_gpu - held)  # plus the recomputed layers' churn
    expandable = memory_estimate(arch, t, allocator="expandable")
    assert est.peak_gib_per_gpu < expandable.reserved_gib_per_gpu < est.reserved_gib_per_gpu


def test_full_fine_tune_of_llama_1b_peaks_far_above_sixteen_bytes_per_parameter():
    # the example: 8 x 1024 tokens, bf16-mixed peaks at about 46 GiB, not the 18 GiB of 16 B/param
    arch = presets()["llama-3.2-1b"].architecture
    est = memory_estimate(arch, TrainingSpec(precision="bf16-mixed", micro_batch_size=8, sequence_length=1024))
    assert 16 * arch.params / K.GIB == pytest.approx(18.4, abs=0.1)
    assert est.peak_gib_per_gpu == pytest.approx(46.3, rel=0.05)
    assert est.breakdown_gib["logits_and_loss"] > est.breakdown_gib["weights"]  # small model, big vocabulary


def test_estimates_are_cached_by_value():
    a = memory_estimate(TINY, spec())
    b = memory_estimate(TINY, spec())
    assert a is b
