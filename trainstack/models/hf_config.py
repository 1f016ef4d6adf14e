"""A Hugging Face ``config.json`` read into an :class:`Architecture`, never guessed.

Each supported ``model_type`` maps its keys the way its transformers modelling code builds the
modules (transformers 5.24, ``models/<type>/modeling_<type>.py``), and fills a missing key with the
default of its config class (``configuration_<type>.py``); those defaults are copied into
:data:`FAMILIES` below. Vision-language configs nest the language model in ``text_config`` and the
image encoder in ``vision_config``.

A key that could change the parameter count and that the family does not understand is an error
naming the key (:class:`HfConfigError`), as is an unknown ``model_type``: a wrong shape would size
the job wrongly without anyone noticing. Keys that never change the shape (rope scaling, dtypes,
token ids, dropout, quantisation of the published checkpoint...) are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Union

from pydantic import ValidationError

from .architecture import Architecture, VisionTower
from .hf_types import type_problem

MAX_CONFIG_BYTES = 1 << 20


class HfConfigError(ValueError):
    """A config.json that cannot be read into a shape: ``key`` is the JSON path of the culprit."""

    def __init__(self, key: str, message: str, given: Any = None, has_given: bool = False):
        super().__init__(f"{key}: {message}" if key else message)
        self.key, self.message, self.given, self.has_given = key, message, given, has_given


#: Keys that never change the parameter count, in any family.
NO_SHAPE_KEYS = frozenset({
    "_name_or_path", "architectures", "auto_map", "model_type", "transformers_version", "torch_dtype", "dtype",
    "bos_token_id", "eos_token_id", "pad_token_id", "initializer_range", "initializer_factor", "use_cache",
    "rms_norm_eps", "layer_norm_eps", "norm_eps", "hidden_act", "hidden_activation", "projector_hidden_act",
    "max_position_embeddings", "original_max_position_embeddings", "rope_theta", "rope_scaling",
    "rope_parameters", "rope_local_base_freq", "partial_rotary_factor", "rope_type",
    "attention_dropout", "embd_pdrop", "resid_pdrop", "hidden_dropout", "sliding_window", "sliding_window_size",
    "sliding_window_pattern", "use_sliding_window", "max_window_layers", "layer_types", "cache_implementation",
    "attn_logit_softcapping", "final_logit_softcapping", "query_pre_attn_scalar", "pretraining_tp",
    "output_router_logits", "router_aux_loss_coef", "router_jitter_noise", "norm_topk_prob", "swiglu_limit",
    "swiglu_alpha", "initial_context_length", "quantization_config", "quantization", "_attn_implementation",
    "_attn_implementation_autoset", "use_bidirectional_attention", "tokenizer_class", "lm_head_bias_false",
    "full_attn_mod", "interpolate_factor", "image_token_index", "image_token_id", "boi_token_index",
    "eoi_token_index", "ignore_index", "vision_feature_select_strategy", "image_seq_length",
    "unsloth_fixed", "unsloth_version", "output_attentions", "output_hidden_states", "return_dict",
})

#: A key whose name looks like it sizes something: unknown ones of this kind are refused.
SHAPE_LIKE = re.compile(r"size|dim|layer|head|expert|vocab|rank|width|hidden|intermediate|shared|dense|moe|"
                        r"proj|bias|embed|tie|norm|num_|^n_|lora|group|kv|query|patch|image|vision|text")


@dataclass(frozen=True)
class Family:
    """How one ``model_type`` becomes an Architecture."""

    defaults: dict[str, Any]
    build: Callable[[dict[str, Any]], dict[str, Any]]
    shape_keys: frozenset[str] = field(default_factory=frozenset)
    source: str = ""


def _get(c: dict[str, Any], key: str) -> Any:
    return c[key]


def _heads(c: dict[str, Any]) -> dict[str, Any]:
    kv = c.get("num_key_value_heads")
    return {"hidden_size": c["hidden_size"], "num_layers": c["num_hidden_layers"],
            "num_attention_heads": c["num_attention_heads"],
            "num_kv_heads": kv if kv is not None else c["num_attention_heads"],
            "intermediate_size": c["intermediate_size"], "vocab_size": c["vocab_size"],
            "tie_embeddings": bool(c["tie_word_embeddings"]), "head_dim": c.get("head_dim")}


def _llama(c: dict[str, Any]) -> dict[str, Any]:
    bias = bool(c.get("attention_bias", False))
    return {**_heads(c), "attention_bias": bias, "attention_output_bias": bias, "mlp_bias": bool(c.get("mlp_bias"))}


def _mistral(c: dict[str, Any]) -> dict[str, Any]:
    return _heads(c)


def _mixtral(c: dict[str, Any]) -> dict[str, Any]:
    return {**_heads(c), "num_experts": c["num_local_experts"], "num_experts_per_token": c["num_experts_per_tok"],
            "expert_intermediate_size": c["intermediate_size"]}


def _qwen2(c: dict[str, Any]) -> dict[str, Any]:
    return {**_heads(c), "attention_bias": True}  # Qwen2Attention: q/k/v bias=True, o_proj none


def _qwen_moe_layers(c: dict[str, Any]) -> dict[str, Any]:
    return {"num_experts": c["num_experts"], "num_experts_per_token": c["num_experts_per_tok"],
            "expert_intermediate_size": c["moe_intermediate_size"],
            "dense_layers": tuple(c.get("mlp_only_layers") or ()), "moe_layer_step": c["decoder_sparse_step"]}


def _qwen2_moe(c: dict[str, Any]) -> dict[str, Any]:
    shared = c.get("shared_expert_intermediate_size") or 0
    return {**_heads(c), "attention_bias": bool(c["qkv_bias"]), **_qwen_moe_layers(c),
            "num_shared_experts": 1 if shared else 0,
            "shared_expert_intermediate_size": shared or None, "shared_expert_gate": bool(shared)}


def _qwen3(c: dict[str, Any]) -> dict[str, Any]:
    bias = bool(c.get("attention_bias", False))
    return {**_heads(c), "attention_bias": bias, "attention_output_bias": bias, "qk_norm": True}


def _qwen3_moe(c: dict[str, Any]) -> dict[str, Any]:
    return {**_qwen3(c), **_qwen_moe_layers(c)}


def _gemma2(c: dict[str, Any]) -> dict[str, Any]:
    bias = bool(c.get("attention_bias", False))
    return {**_heads(c), "attention_bias": bias, "attention_output_bias": bias, "norms_per_layer": 4}


def _gemma3_text(c: dict[str, Any]) -> dict[str, Any]:
    return {**_gemma2(c), "qk_norm": True}


def _phi3(c: dict[str, Any]) -> dict[str, Any]:
    return _heads(c)  # fused qkv_proj and gate_up_proj: the same weights as the split form


def _gpt_oss(c: dict[str, Any]) -> dict[str, Any]:
    bias = bool(c["attention_bias"])
    return {**_heads(c), "attention_bias": bias, "attention_output_bias": bias, "attention_sinks": True,
            "num_experts": c["num_local_experts"], "num_experts_per_token": c["num_experts_per_tok"],
            "expert_intermediate_size": c["intermediate_size"], "expert_bias": True, "router_bias": True}


_DENSE = frozenset({"hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                    "intermediate_size", "vocab_size", "tie_word_embeddings", "head_dim"})
_QWEN_MOE = frozenset({"num_experts", "num_experts_per_tok", "moe_intermediate_size", "mlp_only_layers",
                       "decoder_sparse_step"})
TF = "transformers 5.24.0 src/transformers/models/{0}/configuration_{0}.py"

#: Text families: defaults copied from each transformers config class.
FAMILIES: dict[str, Family] = {
    "llama": Family({"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": None, "tie_word_embeddings": False,
                     "attention_bias": False, "mlp_bias": False, "head_dim": None},
                    _llama, _DENSE | {"attention_bias", "mlp_bias"}, TF.format("llama")),
    "mistral": Family({"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                       "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None,
                       "tie_word_embeddings": False}, _mistral, _DENSE, TF.format("mistral")),
    "mixtral": Family({"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                       "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": None,
                       "tie_word_embeddings": False, "num_experts_per_tok": 2, "num_local_experts": 8},
                      _mixtral, _DENSE | {"num_experts_per_tok", "num_local_experts"}, TF.format("mixtral")),
    "qwen2": Family({"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 32, "tie_word_embeddings": False},
                    _qwen2, _DENSE, TF.format("qwen2")),
    "qwen2_moe": Family({"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 5632,
                         "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
                         "tie_word_embeddings": False, "decoder_sparse_step": 1, "moe_intermediate_size": 1408,
                         "shared_expert_intermediate_size": 5632, "num_experts_per_tok": 4, "num_experts": 60,
                         "mlp_only_layers": None, "qkv_bias": True},
                        _qwen2_moe, _DENSE | _QWEN_MOE | {"shared_expert_intermediate_size", "qkv_bias"},
                        TF.format("qwen2_moe")),
    "qwen3": Family({"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
                     "num_attention_heads": 32, "num_key_value_heads": 32, "head_dim": 128,
                     "tie_word_embeddings": False, "attention_bias": False},
                    _qwen3, _DENSE | {"attention_bias"}, TF.format("qwen3")),
    "qwen3_moe": Family({"vocab_size": 151936, "hidden_size": 2048, "intermediate_size": 6144,
                         "num_hidden_layers": 24, "num_attention_heads": 32, "num_key_value_heads": 4,
                         "head_dim": None, "tie_word_embeddings": False, "attention_bias": False,
                         "decoder_sparse_step": 1, "moe_intermediate_size": 768, "num_experts_per_tok": 8,
                         "num_experts": 128, "mlp_only_layers": None},
                        _qwen3_moe, _DENSE | _QWEN_MOE | {"attention_bias"}, TF.format("qwen3_moe")),
    "gemma2": Family({"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                      "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256,
                      "tie_word_embeddings": True, "attention_bias": False},
                     _gemma2, _DENSE | {"attention_bias"}, TF.format("gemma2")),
    "gemma3_text": Family({"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
                           "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
                           "head_dim": 256, "tie_word_embeddings": True, "attention_bias": False},
                          _gemma3_text, _DENSE | {"attention_bias"}, TF.format("gemma3")),
    "phi3": Family({"vocab_size": 32064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
                    "num_attention_heads": 32, "num_key_value_heads": None, "tie_word_embeddings": False,
                    "head_dim": None},
                   _phi3, _DENSE | {"attention_bias", "mlp_bias", "lm_head_bias"}, TF.format("phi3")),
    "gpt_oss": Family({"num_hidden_layers": 36, "num_local_experts": 128, "vocab_size": 201088, "hidden_size": 2880,
                       "intermediate_size": 2880, "head_dim": 64, "num_attention_heads": 64,
                       "num_key_value_heads": 8, "tie_word_embeddings": False, "num_experts_per_tok": 4,
                       "attention_bias": True},
                      _gpt_oss, _DENSE | {"num_local_experts", "num_experts_per_tok", "experts_per_token",
                                          "attention_bias"}, TF.format("gpt_oss")),
}
FAMILIES["gemma3"] = FAMILIES["gemma3_text"]  # a text-only checkpoint may carry the VLM's type name

#: model_type -> why it cannot be sized yet (clearer than "unknown").
NOT_YET = {
    "deepseek_v2": "multi-head latent attention (MLA) is not modelled yet",
    "deepseek_v3": "multi-head latent attention (MLA) and multi-token prediction are not modelled yet",
    "llama4": "interleaved chunked attention and MoE of Llama 4 are not modelled yet",
    "qwen2_vl": "Qwen2-VL's vision tower (window attention, patch merger) is not modelled yet",
    "qwen2_5_vl": "Qwen2.5-VL's vision tower (window attention, patch merger) is not modelled yet",
}

#: Vision encoders inside a VLM config: defaults of their config classes.
VISION_DEFAULTS = {
    "siglip_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                            "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 16,
                            "vision_use_head": True},
    "clip_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                          "num_attention_heads": 12, "num_channels": 3, "image_size": 224, "patch_size": 32,
                          "projection_dim": 512},
}
VISION_SHAPE_KEYS = frozenset({"hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                               "num_channels", "image_size", "patch_size", "vision_use_head", "projection_dim",
                               "vocab_size"})  # CLIP/SigLIP keep a vocab_size and projection_dim the vision model never uses
#: VLM wrappers: model_type -> (default text model_type, default vision model_type).
VLMS = {"gemma3": ("gemma3_text", "siglip_vision_model"), "llava": ("llama", "clip_vision_model")}
VLM_SHAPE_KEYS = {"gemma3": frozenset({"text_config", "vision_config", "mm_tokens_per_image", "tie_word_embeddings"}),
                  "llava": frozenset({"text_config", "vision_config", "vision_feature_layer", "vocab_size",
                                      "multimodal_projector_bias", "tie_word_embeddings"})}


def supported_model_types() -> list[str]:
    return sorted(set(FAMILIES) | set(VLMS))


def load_hf_config(path: Union[str, Path]) -> Architecture:
    """Read a config.json file into an Architecture: a regular file (never a FIFO or a device) of at
    most 1 MiB, UTF-8, standard JSON at most 64 deep with no key given twice (trainstack.fsutil)."""
    from ..errors import InputError
    from ..fsutil import parse_json, read_regular_file

    try:
        raw = read_regular_file(path, what="config.json", limit=MAX_CONFIG_BYTES)
        doc = parse_json(raw, name=str(path), what="config.json")
    except InputError as exc:
        raise HfConfigError("", exc.problems[0].message if exc.problems else exc.message) from None
    return architecture_from_hf(doc)


def architecture_from_hf(doc: Any) -> Architecture:
    """The Architecture a parsed config.json describes (HfConfigError when it cannot be told)."""
    if not isinstance(doc, dict):
        raise HfConfigError("", "a config.json must be a JSON object", type(doc).__name__, True)
    model_type = doc.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise HfConfigError("model_type", "must be a string", model_type, True)
    if model_type in VLMS and ("text_config" in doc or "vision_config" in doc):
        return _vlm(doc, model_type)
    fields = _text_fields(doc, "")
    return _build(fields, "")


def _family(model_type: Any, where: str) -> Family:
    key = f"{where}model_type"
    if model_type is not None and not isinstance(model_type, str):
        raise HfConfigError(key, "must be a string", model_type, True)
    if model_type is None:
        raise HfConfigError(key, "missing: trainstack needs the model_type to read the config",
                            None, False)
    if model_type in NOT_YET:
        raise HfConfigError(key, f"{model_type}: {NOT_YET[model_type]}; describe the model with "
                                 "model.architecture instead", model_type, True)
    if model_type not in FAMILIES:
        raise HfConfigError(key, f"unknown model_type (supported: {', '.join(supported_model_types())}); describe "
                                 "the model with model.architecture instead", model_type, True)
    return FAMILIES[model_type]


def _check_keys(doc: dict[str, Any], known: frozenset[str], where: str) -> None:
    for key in doc:
        if not isinstance(key, str):
            raise HfConfigError(where.rstrip("."), "keys must be strings", key, True)
        if key in known or key == "model_type":
            problem = type_problem(key, doc[key])
            if problem:
                raise HfConfigError(f"{where}{key}", problem, doc[key], True)
            continue
        if key in NO_SHAPE_KEYS or key.endswith(("_token_id", "_token_index", "_pdrop", "_dropout")):
            continue
        if SHAPE_LIKE.search(key):
            raise HfConfigError(f"{where}{key}", "not understood for this model_type and may change the parameter "
                                                 "count: trainstack does not guess; describe the model with "
                                                 "model.architecture instead", doc[key], True)


def _text_fields(doc: dict[str, Any], where: str, default_type: Optional[str] = None) -> dict[str, Any]:
    family = _family(doc.get("model_type", default_type), where)
    _check_keys(doc, family.shape_keys, where)
    merged = {**family.defaults, **{k: v for k, v in doc.items() if k in family.shape_keys}}
    try:
        return family.build(merged)
    except (KeyError, TypeError) as exc:
        raise HfConfigError(f"{where}{exc.args[0] if exc.args else ''}", "missing or of the wrong type") from None


def _build(fields: dict[str, Any], where: str) -> Architecture:
    try:
        return Architecture(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(x) for x in err["loc"])
        raise HfConfigError(f"{where}{loc}", err["msg"].removeprefix("Value error, "),
                            err.get("input"), "input" in err) from None


def _vision(doc: Any, model_type: str, where: str) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise HfConfigError(where.rstrip("."), "must be a JSON object", type(doc).__name__, True)
    kind = doc.get("model_type", VLMS[model_type][1])
    if not isinstance(kind, str) or kind not in VISION_DEFAULTS:
        raise HfConfigError(f"{where}model_type", f"unknown vision encoder (supported: "
                                                  f"{', '.join(sorted(VISION_DEFAULTS))})", kind, True)
    _check_keys(doc, VISION_SHAPE_KEYS, where)
    v = {**VISION_DEFAULTS[kind], **{k: doc[k] for k in VISION_SHAPE_KEYS if k in doc}}
    if kind == "siglip_vision_model" and v["vision_use_head"]:
        raise HfConfigError(f"{where}vision_use_head", "the SigLIP attention-pooling head is not modelled", True, True)
    v["_kind"] = kind
    return v


def _vlm(doc: dict[str, Any], model_type: str) -> Architecture:
    _check_keys(doc, VLM_SHAPE_KEYS[model_type], "")
    text_type, _ = VLMS[model_type]
    text_doc = doc.get("text_config") or {}
    if not isinstance(text_doc, dict):
        raise HfConfigError("text_config", "must be a JSON object", type(text_doc).__name__, True)
    if model_type == "llava" and "vocab_size" in doc and "vocab_size" not in text_doc:
        text_doc = {**text_doc, "vocab_size": doc["vocab_size"]}
    text = _text_fields(text_doc, "text_config.", text_type)
    v = _vision(doc.get("vision_config") or {}, model_type, "vision_config.")
    th, vh = text["hidden_size"], v["hidden_size"]
    if model_type == "gemma3":
        # Gemma3MultiModalProjector: mm_input_projection_weight (vision x text) and an RMSNorm over vision
        projector, tokens = vh * th + vh, int(doc.get("mm_tokens_per_image", 256))
        text["tie_embeddings"] = bool(doc.get("tie_word_embeddings", text["tie_embeddings"]))
    else:
        # LlavaMultiModalProjector: linear_1 (vision x layers -> text) and linear_2 (text -> text), biases
        layers = doc.get("vision_feature_layer", -2)
        n = 1 if isinstance(layers, int) else len(layers)
        bias = bool(doc.get("multimodal_projector_bias", True))
        projector = vh * n * th + th * th + (2 * th if bias else 0)
        tokens = (v["image_size"] // v["patch_size"]) ** 2
        text["tie_embeddings"] = bool(doc.get("tie_word_embeddings", False))
    try:
        text["vision"] = VisionTower(
            hidden_size=vh, intermediate_size=v["intermediate_size"], num_layers=v["num_hidden_layers"],
            patch_size=v["patch_size"], image_size=v["image_size"], num_channels=v["num_channels"],
            class_token=v["_kind"] == "clip_vision_model", projector_params=projector, tokens_per_image=tokens)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise HfConfigError(f"vision_config.{'.'.join(map(str, err['loc']))}", err["msg"],
                            err.get("input"), "input" in err) from None
    return _build(text, "text_config.")
