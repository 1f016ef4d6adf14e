"""Links between ranks (trainstack/sizing/links.py): where each dimension's groups sit in Megatron's
rank order, the bandwidth every communication term reads from them, and the typed reason when no
link can carry a layout, checked against a brute-force placement of every rank."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainstack.architecture import presets
from trainstack.profile import TrainingSpec
from trainstack.reasons import ReasonCode
from trainstack.sizing import constants as K
from trainstack.sizing import throughput_estimate
from trainstack.sizing.communication import cp_seconds, pp_seconds, tp_seconds
from trainstack.sizing.links import _uneven_span, group_span, links
from trainstack.sizing.parallel import Layout, stages

from test_throughput import H200

L8B = presets()["llama-3-8b"].architecture
L70B = presets()["llama-3-70b"].architecture
MIXTRAL = presets()["mixtral-8x7b"].architecture


def spec(**kw) -> TrainingSpec:
    base = dict(method="full", precision="bf16-mixed", micro_batch_size=1, sequence_length=8192,
                gradient_checkpointing=True, zero_stage=1, framework="megatron")
    base.update(kw)
    return TrainingSpec(**base)


def groups(lay: Layout, dim: str) -> list[list[int]]:
    """Every group of ``dim`` by brute force: rank = tp_i + tp (cp_i + cp (dp_i + dp pp_i)) (Megatron's
    tp-cp-dp-pp); the gradient group ``dp`` is the dp x cp ranks; ``ep`` consecutive members of it."""
    coords = list(itertools.product(range(lay.pp), range(lay.dp), range(lay.cp), range(lay.tp)))

    def rank(p: int, d: int, c: int, t: int) -> int:
        return t + lay.tp * (c + lay.cp * (d + lay.dp * p))

    key = {"tp": lambda p, d, c, t: (p, d, c), "cp": lambda p, d, c, t: (p, d, t), "pp": lambda p, d, c, t: (d, c, t),
           "dp": lambda p, d, c, t: (p, t)}
    if dim == "ep":
        out = []
        for g in groups(lay, "dp"):
            out += [g[i:i + lay.ep] for i in range(0, len(g), lay.ep)]
        return out
    found: dict = {}
    for p, d, c, t in coords:
        found.setdefault(key[dim](p, d, c, t), []).append(rank(p, d, c, t))
    return [sorted(g) for g in found.values()]


def brute_span(members_of: list[list[int]], per_node: int) -> tuple[int, int, int]:
    shapes, fewest = [], math.inf
    for g in members_of:
        counts: dict[int, int] = {}
        for r in g:
            counts[r // per_node] = counts.get(r // per_node, 0) + 1
        shapes.append((len(counts), -max(counts.values())))
        fewest = min(fewest, min(counts.values()))
    nodes, most = max(shapes)
    return -most, int(fewest), nodes


@settings(max_examples=300, deadline=None, derandomize=True)
@given(tp=st.sampled_from([1, 2, 3, 4, 8]), cp=st.sampled_from([1, 2, 4]), dp=st.integers(1, 6),
       pp=st.sampled_from([1, 2, 3, 4, 8]), ep=st.sampled_from([1, 2, 4]),
       per_node=st.sampled_from([1, 2, 4, 8, 16]))
def test_every_group_sits_where_megatrons_rank_order_puts_it(tp, cp, dp, pp, ep, per_node):
    lay = Layout(tp=tp, cp=cp, dp=dp, pp=pp, ep=ep if (dp * cp) % ep == 0 else 1)
    nodes = math.ceil(lay.world / per_node)
    lk = links(lay, H200, per_node, nodes, "nvswitch", "erdma", 400.0)
    for link in lk:
        size = {"tp": tp, "cp": cp, "dp": dp * cp, "ep": lay.ep, "pp": pp}[link.dim]
        if size == 1:
            assert (link.inside, link.fewest, link.nodes) == (1, 1, 1)
            continue
        assert (link.inside, link.fewest, link.nodes) == brute_span(groups(lay, link.dim), per_node), link.dim
    assert lk.problem is None


def test_the_shortcut_for_groups_that_tile_nodes_agrees_with_looking_at_every_start():
    for size, stride, outer, per_node in itertools.product(range(2, 13), range(1, 18), (1, 2, 3, 5), (1, 2, 4, 8, 16)):
        assert group_span(size, stride, outer, per_node) == _uneven_span(size, stride, min(outer, per_node), per_node)


def test_aligned_groups_keep_the_one_formula_of_before():
    # where every group tiles the nodes alike, the span is min(size, per_node // stride) per node
    for size, stride, per_node in itertools.product([2, 4, 8, 16], [1, 2, 4, 8, 16], [1, 2, 4, 8]):
        inside = max(1, min(size, per_node // stride)) if stride < per_node else 1
        assert group_span(size, stride, 2, per_node) == (inside, inside, math.ceil(size / inside))


def test_readme_layout_tp_inside_dp_inside_pp_across_four_nodes():
    lk = links(Layout(tp=2, pp=4, dp=4), H200, 8, 4, "nvswitch", "erdma", 200.0)
    assert (lk.tp.nodes, lk.dp.nodes, lk.pp.nodes) == (1, 1, 4)
    assert lk.tp.stream_bytes_s == K.INTRA_NODE_GBPS["hopper"] * 1e9
    assert lk.pp.stream_bytes_s == pytest.approx(200 / 8 * 1e9 * K.NETWORK_EFFICIENCY["erdma"] / 8)


def test_a_stage_that_straddles_nodes_reduces_its_gradients_over_the_network():
    # TP 2 x PP 4 x DP 3 on 3 x 8: stage 1 holds ranks 6-11, half on node 0, half on node 1
    lk = links(Layout(tp=2, pp=4, dp=3), H200, 8, 3, "nvswitch", "erdma", 200.0)
    assert lk.dp.crosses_nodes and lk.dp.fewest == 1
    aligned = links(Layout(tp=2, pp=4, dp=4), H200, 8, 4, "nvswitch", "erdma", 200.0)
    assert not aligned.dp.crosses_nodes


def test_every_term_reads_its_bandwidth_from_its_link():
    t = spec()
    lay = Layout(tp=2, pp=4, cp=2, dp=2)
    stage = stages(L70B.num_layers, lay, 8)[0]
    slow = links(lay, H200, 2, 16, "nvswitch", "erdma", 100.0)
    fast = links(lay, H200, 2, 16, "nvswitch", "erdma", 400.0)
    # tp inside a node: the network does not matter; cp and pp cross nodes: 4x the network, 1/4 the time
    assert tp_seconds(L70B, t, stage, slow.tp) == tp_seconds(L70B, t, stage, fast.tp) > 0
    assert slow.cp.crosses_nodes and slow.pp.crosses_nodes
    assert cp_seconds(L70B, t, stage, slow.cp) == pytest.approx(4 * cp_seconds(L70B, t, stage, fast.cp))
    assert pp_seconds(L70B, t, stage, slow.pp) == pytest.approx(4 * pp_seconds(L70B, t, stage, fast.pp))
    # TP across nodes (16 ranks on 8-GPU nodes) runs at a GPU's share of the network, not NVLink
    wide = links(Layout(tp=16), H200, 8, 2, "nvswitch", "erdma", 400.0)
    assert wide.tp.crosses_nodes and wide.tp.stream_bytes_s < slow.tp.stream_bytes_s


def test_one_node_data_parallel_speed_ignores_the_network():
    t = spec(global_batch_size=64)
    a = throughput_estimate(L8B, t, H200, 8, 1, "nvswitch", "none", None)
    b = throughput_estimate(L8B, t, H200, 8, 1, "nvswitch", "erdma", 0.0)
    assert a.tokens_per_second == b.tokens_per_second and a.problem is None and b.problem is None


@pytest.mark.parametrize("tp,pp,cp", [(2, 4, 1), (1, 16, 1), (1, 1, 16), (2, 2, 8), (8, 2, 2)])
def test_a_layout_bigger_than_the_cluster_is_a_typed_reason_not_a_crash(tp, pp, cp):
    lay = Layout(tp=tp, pp=pp, cp=cp)
    for per_node, nodes in ((4, 1), (1, 1), (2, 2)) + (((8, 1),) if lay.world > 8 else ()):
        est = throughput_estimate(L70B, spec(), H200, per_node, nodes, "nvswitch", "none", None, layout=lay)
        assert est.tokens_per_second is None and est.problem is not None
        assert est.problem.code is ReasonCode.LAYOUT_WORLD_SIZE
        assert f"{lay.world} ranks" in est.problem.message and est.problem.message in est.labels


def test_groups_across_nodes_with_no_network_bandwidth_are_a_typed_reason():
    est = throughput_estimate(L70B, spec(), H200, 8, 4, "nvswitch", "erdma", 0.0, layout=Layout(tp=2, pp=4, dp=4))
    assert est.tokens_per_second is None and est.problem.code is ReasonCode.LAYOUT_NO_LINK
    assert "pipeline sends" in est.problem.message and "pp 4" in est.problem.message


def test_moe_all_to_all_crosses_the_network_only_past_the_node():
    t = spec(expert_parallel=8, zero_stage=1)
    inside = links(Layout(dp=8, ep=8), H200, 8, 1, "nvswitch", "none", None)
    across = links(Layout(tp=2, dp=8, ep=8), H200, 8, 2, "nvswitch", "erdma", 400.0)
    assert not inside.ep.crosses_nodes and across.ep.crosses_nodes and across.ep.fewest == 4
    one = throughput_estimate(MIXTRAL, t, H200, 8, 1, "nvswitch")
    two = throughput_estimate(MIXTRAL, t.model_copy(update={"tensor_parallel": 2}), H200, 8, 2, "nvswitch",
                              "erdma", 400.0)
    assert one.problem is None and two.problem is None and two.communication_seconds > 0
