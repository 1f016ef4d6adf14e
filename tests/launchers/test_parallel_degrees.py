"""The plan's parallel degrees reach the programs that take them, with each tool's documented flags
(data/parallel.yaml); a program that cannot take them refuses the layout with the reason and the fix."""

from __future__ import annotations

import pytest
from documented import parse

from trainstack.launchers import Degrees, Topology, check_command, check_degrees, command_degrees, dlc_command, render_launch
from trainstack.launchers.words import text_of

LAYOUT = Degrees(tensor=8, pipeline=2, context=1, data=2, micro_batches=16, sharded=True)
TOPO = Topology(nnodes=4, nproc_per_node=8, hosts=tuple(f"10.0.0.{10 + i}" for i in range(4)), degrees=LAYOUT)


def argv(command: str, topology: Topology = TOPO) -> list[str]:
    return [text_of(w) for w in render_launch(command, topology, min(1, topology.nnodes - 1)).argv]


def messages(command: str, topology: Topology = TOPO) -> list[str]:
    return [p.message for p in check_command(command, topology)]


def test_torchtitan_gets_its_parallelism_overrides_after_the_program():
    words = argv("torchrun -m torchtitan.train --job.config_file llama3_70b.toml")
    opts, program = parse(words[1:], "torchrun")
    assert program[:3] == ["torchtitan.train", "--job.config_file", "llama3_70b.toml"]
    flags = dict(zip(program[3::2], program[4::2]))
    assert flags == {"--parallelism.tensor_parallel_degree": "8", "--parallelism.pipeline_parallel_degree": "2",
                     "--parallelism.context_parallel_degree": "1", "--parallelism.data_parallel_shard_degree": "2",
                     "--parallelism.data_parallel_replicate_degree": "1",
                     "--parallelism.pipeline_parallel_schedule": "1F1B"}


def test_megatron_lm_gets_its_argparse_flags_and_sequence_parallelism():
    words = argv("torchrun pretrain_gpt.py --micro-batch-size 1 --tensor-model-parallel-size 8")
    _, program = parse(words[1:], "torchrun")
    assert program[0] == "pretrain_gpt.py" and program.count("--tensor-model-parallel-size") == 1
    i = program.index("--tensor-model-parallel-size")
    assert program[i + 1] == "8" and program[program.index("--pipeline-model-parallel-size") + 1] == "2"
    assert "--sequence-parallel" in program and program[1:3] == ["--micro-batch-size", "1"]


def test_accelerate_gets_parallelism_config_or_its_megatron_plugin():
    topo = Topology(nnodes=2, nproc_per_node=8, hosts=("10.0.0.10", "10.0.0.11"),
                    degrees=Degrees(tensor=4, context=2, data=2, sharded=True))
    opts, program = parse(argv("accelerate launch --use_fsdp train.py", topo)[2:], "accelerate")
    assert (opts["--use_parallelism_config"], opts["--parallelism_config_tp_size"],
            opts["--parallelism_config_cp_size"], opts["--parallelism_config_dp_shard_size"]) == ("true", "4", "2", "2")
    assert program == ["train.py"]
    opts, _ = parse(argv("accelerate launch --use_megatron_lm train.py")[2:], "accelerate")
    assert (opts["--megatron_lm_tp_degree"], opts["--megatron_lm_pp_degree"], opts["--megatron_lm_num_micro_batches"],
            opts["--megatron_lm_sequence_parallelism"]) == ("8", "2", "16", "true")


def test_tune_full_finetune_gets_tensor_parallel_dim():
    topo = Topology(nnodes=1, nproc_per_node=8, hosts=("10.0.0.10",), degrees=Degrees(tensor=8))
    words = argv("tune run full_finetune_distributed --config llama3/70B_full", topo)
    assert words[-1] == "tensor_parallel_dim=8"


@pytest.mark.parametrize("command", [
    "python train.py", "deepspeed train.py --deepspeed ds.json", "llamafactory-cli train c.yaml",
    "swift sft --model m", "bash run.sh", "accelerate launch --use_deepspeed train.py",
    "accelerate launch --use_fsdp train.py",  # pipeline parallelism: Accelerate's ParallelismConfig has none
])
def test_programs_that_cannot_take_the_degrees_refuse_the_layout(command):
    found = messages(command)
    assert any("takes no" in m and "parallel degree" in m and "; fix: " in m for m in found), found


def test_a_degree_the_command_gives_must_say_what_the_plan_says():
    assert messages("torchrun pretrain_gpt.py --tensor-model-parallel-size 8") == []
    (m,) = messages("torchrun pretrain_gpt.py --tensor-model-parallel-size 4")
    assert "contradicts the plan's layout" in m
    (m,) = messages("torchrun -m torchtitan.train --parallelism.pipeline_parallel_degree=4")
    assert "--parallelism.pipeline_parallel_degree 4" in m
    (m,) = messages("accelerate launch --use_megatron_lm --megatron_lm_tp_degree 2 train.py")
    assert "--megatron_lm_tp_degree 2" in m


def test_a_plain_layout_changes_no_command_and_refuses_nothing():
    plain = Topology(nnodes=2, nproc_per_node=8, hosts=("10.0.0.10", "10.0.0.11"))
    assert messages("deepspeed train.py", plain) == [] and messages("python train.py", plain) == []
    assert argv("torchrun -m torchtitan.train --job.config_file c.toml", plain)[-3:] == [
        "torchtitan.train", "--job.config_file", "c.toml"]


def test_what_a_command_can_carry_and_the_profile_level_check():
    assert command_degrees("torchrun -m torchtitan.train") == {"tensor", "pipeline", "context", "expert"}
    assert command_degrees("accelerate launch --use_fsdp t.py") == {"tensor", "context"}
    assert command_degrees("tune run full_finetune_distributed --config c") == {"tensor"}
    assert command_degrees("python train.py") == frozenset()
    assert check_degrees("python train.py", Degrees(context=2))
    assert not check_degrees("torchrun pretrain_gpt.py", Degrees(context=2))


def test_dlc_pods_get_the_same_degrees():
    dlc = Topology(nnodes=4, nproc_per_node=8, platform="dlc", degrees=LAYOUT)
    line = dlc_command("torchrun pretrain_gpt.py", dlc)
    assert "pretrain_gpt.py --tensor-model-parallel-size 8 --pipeline-model-parallel-size 2" in line
    assert line.endswith("--sequence-parallel")
