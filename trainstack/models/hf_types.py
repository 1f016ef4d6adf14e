"""The JSON type every shape key of a Hugging Face ``config.json`` must have, checked before the
value is used: ``true`` for a head count, ``"4096"`` for a width or ``"false"`` for a flag are
refused with the key, the value given and what is allowed, never coerced (Python would read
``true`` as 1 KV head and ``bool("false")`` as True, and the job would be sized for another model).

The types are those of transformers' config classes (transformers 5.24.0
``src/transformers/models/<type>/configuration_<type>.py``: ``hidden_size: int``,
``num_key_value_heads: Optional[int]``, ``tie_word_embeddings: bool``, ``mlp_only_layers:
Optional[list[int]]``, Llava's ``vision_feature_layer: Union[int, list[int]]``); JSON has one
integer type, so ``4096.0`` is not a width either.
"""

from __future__ import annotations

from typing import Any, Callable


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _whole_or_null(v: Any) -> bool:
    return v is None or _whole(v)


def _flag(v: Any) -> bool:
    return isinstance(v, bool)


def _whole_list(v: Any) -> bool:
    return isinstance(v, list) and all(_whole(x) for x in v)


def _whole_list_or_null(v: Any) -> bool:
    return v is None or _whole_list(v)


def _whole_or_list(v: Any) -> bool:
    return _whole(v) or _whole_list(v)


def _object_or_null(v: Any) -> bool:
    return v is None or isinstance(v, dict)


def _text(v: Any) -> bool:
    return isinstance(v, str)


#: what each kind allows, in the words of an error message
KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "int": (_whole, "a JSON integer (not a string, a boolean or a decimal)"),
    "int?": (_whole_or_null, "a JSON integer or null"),
    "bool": (_flag, "true or false (a JSON boolean, not a string or a number)"),
    "ints?": (_whole_list_or_null, "a list of JSON integers, or null"),
    "int|ints": (_whole_or_list, "a JSON integer or a list of them"),
    "object?": (_object_or_null, "a JSON object or null"),
    "str": (_text, "a string"),
}

#: shape key -> kind, for every key a family, a VLM wrapper or a vision encoder reads
KEY_TYPES: dict[str, str] = {
    **dict.fromkeys(("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size",
                     "num_local_experts", "num_experts_per_tok", "experts_per_token", "num_experts",
                     "moe_intermediate_size", "decoder_sparse_step", "mm_tokens_per_image", "num_channels",
                     "image_size", "patch_size", "projection_dim"), "int"),
    **dict.fromkeys(("num_key_value_heads", "head_dim", "shared_expert_intermediate_size"), "int?"),
    **dict.fromkeys(("tie_word_embeddings", "attention_bias", "mlp_bias", "qkv_bias", "lm_head_bias",
                     "vision_use_head", "multimodal_projector_bias"), "bool"),
    "mlp_only_layers": "ints?",
    "vision_feature_layer": "int|ints",
    "text_config": "object?",
    "vision_config": "object?",
    "model_type": "str",
}


def type_problem(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` for ``key`` (None: its type is right, or the key is not typed here)."""
    kind = KEY_TYPES.get(key)
    if kind is None:
        return None
    ok, allowed = KINDS[kind]
    return None if ok(value) else f"must be {allowed}"
