"""The resolver's layout search (trainstack/placement/engine.py): every candidate gets its best
tensor/pipeline/context layout when the profile leaves the degrees unset and its framework and
command can run them; the chosen one is explained in the plan and carried to the launchers."""

from __future__ import annotations

import pytest

from trainstack.catalog import load_catalog
from trainstack.errors import InfeasibleError, InputError
from trainstack.launchers import topology_from_plan
from trainstack.placement import resolve_all
from trainstack.placement.layouts import CP_MIN_TOKENS_PER_RANK, layout_options
from trainstack.profile import parse_profile
from trainstack.reasons import ReasonCode
from trainstack.rules import planned

CATALOG = load_catalog()

FULL_70B = {
    "name": "l70", "model": {"preset": "llama-3-70b"},
    "training": {"method": "full", "precision": "bf16-mixed", "framework": "megatron", "micro_batch_size": 1,
                 "sequence_length": 4096, "global_batch_size": 128, "gradient_checkpointing": True, "zero_stage": 1,
                 "tokens": 2e8},
    "job": {"command": "torchrun pretrain_gpt.py --micro-batch-size 1 --global-batch-size 128"},
    "resources": {"target": "ecs", "gpus": 32, "gpu_models": ["A100-80G"], "max_nodes": 4, "spot": "never"},
}
LONG_8B = {
    "name": "l8", "model": {"preset": "llama-3-8b"},
    "training": {"method": "full", "precision": "bf16-mixed", "framework": "torchtitan", "micro_batch_size": 1,
                 "sequence_length": 32768, "gradient_checkpointing": "selective", "zero_stage": 3, "tokens": 1e9},
    "job": {"command": "torchrun -m torchtitan.train --job.config_file llama3_8b.toml"},
    "resources": {"target": "ecs", "gpus": 8, "gpu_models": ["A100-80G"], "spot": "never"},
}


def profile(base: dict, **sections) -> object:
    doc = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for section, changes in sections.items():
        doc[section] = changes if section == "model" else {**doc.get(section, {}), **changes}
    return parse_profile(doc)


def test_a_70b_full_fine_tune_on_4_x_8_a100_plans_with_tensor_and_pipeline_parallelism():
    plan = planned(profile(FULL_70B), CATALOG)
    lay = plan.parallelism.layout
    assert (plan.nodes, plan.gpus_per_node, plan.gpu_model) == (4, 8, "A100-80G")
    assert lay.tensor_parallel > 1 and lay.pipeline_parallel > 1 and lay.world_size == 32
    assert lay.tensor_parallel <= plan.gpus_per_node  # TP stays inside a node
    assert plan.parallelism.chosen_by == "resolver" and plan.job.parallel == lay
    # the search sized every layout it tried; the plain data-parallel one does not fit an 80 GB GPU
    considered = plan.parallelism.considered
    assert len(considered) >= 10 and sum(o.chosen for o in considered) == 1
    plain = next(o for o in considered if o.layout.trivial)
    assert not plain.fits and plain.required_gib_per_gpu > 80
    # issue 32: among the layouts that fit, those that fit with the memory interval's upper end come first
    safe = [o for o in considered if o.fit == "fits"]
    assert safe and all(o.fits for o in safe)
    best = max(safe, key=lambda o: o.tokens_per_second)
    assert best.chosen and best.layout == lay and plan.estimate.fit == "fits"
    faster = [o for o in considered if o.fits and o.fit == "at_risk" and o.tokens_per_second > best.tokens_per_second]
    assert all(o.required_gib_per_gpu > best.required_gib_per_gpu for o in faster)
    why = next(r for r in plan.reasons if r.startswith("layout "))
    assert "chosen by the resolver" in why and "data parallelism alone needs" in why and lay.label in why
    # micro-batches from the batch settings: 128 sequences over the data-parallel ranks
    assert plan.parallelism.micro_batches == 128 // lay.data_parallel == plan.job.gradient_accumulation_steps
    assert 0 < plan.parallelism.bubble_fraction < 0.5


def test_a_32k_context_8b_job_plans_with_context_parallelism():
    plan = planned(profile(LONG_8B), CATALOG)
    lay = plan.parallelism.layout
    assert lay.context_parallel > 1 and lay.world_size == 8
    assert 32768 // lay.context_parallel >= CP_MIN_TOKENS_PER_RANK
    assert any("CP " in r for r in plan.reasons)
    # torchtitan gets the degrees as its documented overrides
    launch = topology_from_plan(plan).degrees
    assert (launch.tensor, launch.context, launch.data) == (lay.tensor_parallel, lay.context_parallel,
                                                            lay.data_parallel)


def test_degrees_the_profile_gives_are_kept_and_the_rest_searched():
    plan = planned(profile(FULL_70B, training={**FULL_70B["training"], "tensor_parallel": 8}), CATALOG)
    assert plan.parallelism.layout.tensor_parallel == 8
    assert {o.layout.tensor_parallel for o in plan.parallelism.considered} == {8}
    fixed = planned(profile(FULL_70B, training={**FULL_70B["training"], "tensor_parallel": 4,
                                                 "pipeline_parallel": 4}), CATALOG)
    assert fixed.parallelism.chosen_by == "profile" and fixed.parallelism.layout.label == "TP 4 x PP 4 x DP 2"
    assert "as the profile states it" in " ".join(fixed.reasons)


def test_no_search_without_a_framework_or_command_that_runs_the_degrees():
    inst = CATALOG.instance("ecs.ebmgn7ex.32xlarge")
    litgpt = profile(FULL_70B, training={**FULL_70B["training"], "framework": "litgpt"})  # FSDP only
    assert [lay.label for lay in layout_options(litgpt, inst, 4)[0]] == ["DP 32"]
    hf = profile(FULL_70B, training={**FULL_70B["training"], "framework": "hf"}, job={"command": "python train.py"})
    layouts, why = layout_options(hf, inst, 4)
    assert why is None and [lay.label for lay in layouts] == ["DP 32"]
    accelerate = profile(FULL_70B, training={**FULL_70B["training"], "framework": "hf"},
                         job={"command": "accelerate launch --use_fsdp train.py"})
    searched = {(lay.tp, lay.pp, lay.cp) for lay in layout_options(accelerate, inst, 4)[0]}
    assert (8, 1, 1) in searched and all(pp == 1 for _, pp, _ in searched)  # hf + Accelerate: TP/CP, no PP
    script = profile(FULL_70B, job={"command": "python train.py"})
    with pytest.raises(InfeasibleError):
        resolve_all(script, CATALOG)  # megatron, but a script trainstack cannot give degrees: ZeRO-1 alone


def test_tensor_parallel_wider_than_a_node_is_rejected_per_type_with_its_code():
    p = profile(FULL_70B, training={**FULL_70B["training"], "tensor_parallel": 8},
                resources={"gpu_models": [], "gpus": "auto", "max_nodes": 4})
    res = resolve_all(p, CATALOG)
    codes = {c.reason_code for c in res.candidates if c.gpus_per_node < 8}
    assert ReasonCode.TENSOR_PARALLEL_ACROSS_NODES in codes
    assert all(c.gpus_per_node >= 8 for c in res.candidates if c.feasible)


@pytest.mark.parametrize("training, path, fragment", [
    ({"tensor_parallel": 16}, "training.tensor_parallel", "key/value heads"),
    ({"tensor_parallel": 3}, "training.tensor_parallel", "64 attention heads"),
    ({"pipeline_parallel": 3}, "training.pipeline_parallel", "80 layers"),
    ({"tensor_parallel": 8, "pipeline_parallel": 8}, "training.tensor_parallel", "must divide the world size (32"),
    ({"context_parallel": 3}, "training.context_parallel", "divisible by 2 x 3"),
    ({"pipeline_parallel": 2, "virtual_pipeline_stages": 3}, "training.virtual_pipeline_stages", "40 layers"),
    ({"virtual_pipeline_stages": 2}, "training.virtual_pipeline_stages", "needs pipeline_parallel > 1"),
    ({"framework": "litgpt", "tensor_parallel": 2}, "training.tensor_parallel", "cannot run tensor parallelism"),
    ({"framework": "hf", "pipeline_parallel": 2}, "training.pipeline_parallel", "cannot run pipeline parallelism"),
])
def test_impossible_layouts_are_input_errors_at_the_field(training, path, fragment):
    with pytest.raises(InputError) as err:
        profile(FULL_70B, training={**FULL_70B["training"], **training})
    problem = next(p for p in err.value.problems if p.path == path)
    assert fragment in problem.message and problem.has_given


def test_tensor_parallel_across_nodes_and_uncarried_degrees_fail_validate_with_the_reason():
    arch = {"hidden_size": 4096, "num_layers": 32, "num_attention_heads": 32, "num_kv_heads": 32,
            "intermediate_size": 11008, "vocab_size": 32000}
    wide = profile(FULL_70B, model={"architecture": arch}, training={**FULL_70B["training"], "tensor_parallel": 16})
    with pytest.raises(InputError) as err:
        planned(wide, CATALOG)
    (p,) = err.value.problems
    assert p.path == "training.tensor_parallel" and "would span nodes" in p.message and p.allowed == (
        "1 to 8, dividing the GPUs of a node")
    script = profile(FULL_70B, training={**FULL_70B["training"], "tensor_parallel": 4}, job={"command": "python t.py"})
    with pytest.raises(InputError) as err:
        planned(script, CATALOG)
    assert any(p.path == "job.command" and "takes no tensor-parallel degree" in p.message and "; fix: " in p.message
               for p in err.value.problems)
