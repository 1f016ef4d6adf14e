"""The kernel choices a profile's ``training`` section can state (issue 32): the attention implementation,
the FP8 scaling recipe and hybrid sharding (HSDP), with which stack runs which, each with its source.

Pure data and one rule function, read by the profile's validator (exit 2 at the field, naming what is
allowed) and by the sizing model (``trainstack.sizing.frameworks``), so the two apply one rule book.
"""

from __future__ import annotations

from typing import Literal, Optional

Attention = Literal["flash", "sdpa", "eager"]
Fp8Recipe = Literal["tensorwise", "rowwise"]
Sharding = Literal["full", "hybrid"]

#: framework -> (attention implementations it has a path for, its default, source)
ATTENTION_BY_FRAMEWORK: dict[str, tuple[tuple[str, ...], str, str]] = {
    "hf": (("flash", "sdpa", "eager"), "sdpa",
           "transformers attn_implementation: eager, sdpa, flash_attention_2 (huggingface/transformers@00edd8f5 "
           "docs/source/en/attention_interface.md: 'the default attention function (SDPA)'; the eager path is "
           "LlamaAttention.forward, src/transformers/models/llama/modeling_llama.py @ 00227283)"),
    "torchtune": (("sdpa",), "sdpa", "torchtune modules/attention_utils.py _sdpa_or_flex_attention: "
                                      "torch.nn.functional.scaled_dot_product_attention (flex for packed batches)"),
    "torchtitan": (("sdpa",), "sdpa", "torchtitan models/attention.py ScaledDotProductAttention "
                                       "(F.scaled_dot_product_attention; FlexAttention optional)"),
    "megatron": (("flash", "eager"), "flash",
                 "Megatron-Core megatron/core/transformer/enums.py AttnBackend: flash, fused (Transformer Engine), "
                 "unfused, local; auto picks TE's flash/fused kernels"),
    "llm-foundry": (("flash", "eager"), "flash", "llm-foundry llmfoundry/models/layers/attention.py attn_impl "
                                                  "'flash' (default) or 'torch' (scaled_multihead_dot_product_attention)"),
    "litgpt": (("sdpa",), "sdpa", "litgpt litgpt/model.py CausalSelfAttention.scaled_dot_product_attention "
                                   "(torch.nn.functional.scaled_dot_product_attention)"),
}
#: Stacks that run hybrid sharding (shard inside a node, replicate across nodes), with where.
HYBRID_SHARDING: dict[str, str] = {
    "hf": "PyTorch FSDP ShardingStrategy.HYBRID_SHARD (Accelerate fsdp_sharding_strategy HYBRID_SHARD)",
    "torchtitan": "torchtitan ParallelismConfig data_parallel_replicate_degree x data_parallel_shard_degree (HSDP)",
    "llm-foundry": "Composer fsdp_config sharding_strategy HYBRID_SHARD",
}


def default_attention(framework: str) -> str:
    return ATTENTION_BY_FRAMEWORK[framework][1]


def kernel_problems(framework: str, precision: str, zero_stage: int, attention: Optional[str] = None,
                    fp8_recipe: Optional[str] = None, sharding: Optional[str] = None) -> list[tuple[str, str]]:
    """(field, why) for each kernel choice the profile's stack cannot run or its settings cannot have."""
    out = []
    allowed, _, _ = ATTENTION_BY_FRAMEWORK[framework]
    if attention is not None and attention not in allowed:
        who = sorted(f for f, (a, _, _) in ATTENTION_BY_FRAMEWORK.items() if attention in a)
        out.append(("attention", f"framework {framework} has no {attention} attention path; allowed with "
                                 f"{framework}: {', '.join(allowed)} (frameworks with {attention}: "
                                 f"{', '.join(who) or 'none'})"))
    if fp8_recipe is not None and precision != "fp8-mixed":
        out.append(("fp8_recipe", f"fp8_recipe {fp8_recipe} needs precision fp8-mixed (got {precision})"))
    if sharding == "hybrid":
        if zero_stage < 3:
            out.append(("sharding", f"sharding hybrid (HSDP: ZeRO-3 inside a node, replicas across nodes) needs "
                                    f"zero_stage 3 (got {zero_stage})"))
        elif framework not in HYBRID_SHARDING:
            out.append(("sharding", f"framework {framework} has no hybrid sharding; frameworks that have: "
                                    f"{', '.join(sorted(HYBRID_SHARDING))}"))
    return out
