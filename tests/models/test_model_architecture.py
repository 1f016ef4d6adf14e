"""Parameter counts by hand for small shapes, and the shape rules (what a MoE layer is, what is refused)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from trainstack.models import Architecture

DENSE = dict(hidden_size=8, num_layers=2, num_attention_heads=2, num_kv_heads=1, intermediate_size=16, vocab_size=10)


def test_dense_count_by_hand():
    a = Architecture(**DENSE)
    attn = 8 * 8 + 8 * 4 + 8 * 4 + 8 * 8          # q, k, v, o (head_dim 4, one kv head)
    mlp = 3 * 8 * 16
    assert a.params == 2 * 10 * 8 + 2 * (attn + mlp + 2 * 8) + 8


def test_moe_count_by_hand_all_experts_held_k_active():
    a = Architecture(**DENSE, num_experts=4, num_experts_per_token=2, expert_intermediate_size=6,
                     num_shared_experts=1, shared_expert_intermediate_size=12, shared_expert_gate=True,
                     first_dense_layers=1)
    attn = 8 * 8 + 8 * 4 + 8 * 4 + 8 * 8
    dense_layer = attn + 3 * 8 * 16 + 16
    moe_layer = attn + 4 * 3 * 8 * 6 + 3 * 8 * 12 + 8 + 8 * 4 + 16   # experts, shared, its gate, router, norms
    assert a.moe_layers == 1 and a.dense_mlp_layers == 1
    assert a.params == 2 * 80 + dense_layer + moe_layer + 8
    assert a.active_params == a.params - 2 * 3 * 8 * 6
    assert a.matmul_params - a.active_matmul_params == 2 * 3 * 8 * 6


@pytest.mark.parametrize("extra, needle", [
    ({"num_experts": 4, "num_experts_per_token": 5}, "num_experts_per_token"),
    ({"num_experts": 4, "num_experts_per_token": 0}, "num_experts_per_token"),
    ({"num_experts_per_token": 2}, "need num_experts"),
    ({"num_experts": 4, "num_experts_per_token": 1, "first_dense_layers": 2}, "no layer is a MoE layer"),
    ({"num_experts": 4, "num_experts_per_token": 1, "dense_layers": (7,)}, "outside"),
    ({"num_attention_heads": 3, "num_kv_heads": 2}, "multiple of"),
    ({"num_attention_heads": 3}, "must divide by"),
])
def test_inconsistent_shapes_are_refused(extra, needle):
    with pytest.raises(ValidationError, match=needle):
        Architecture(**{**DENSE, **extra})
