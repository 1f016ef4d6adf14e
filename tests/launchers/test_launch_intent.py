"""Launch intent (issue 34): every launcher keeps training.global_batch_size at the plan's node count,
never overrides a value the command gives, refuses options that contradict the profile naming both,
and accepts the tools' own README forms of the topology when they agree with the plan.

The accumulation each launch really carries is read back from the rendered launch the way the tool
reads it (an option after the program, a key=value override, or the trainer's environment), so the
global batch is micro-batch x accumulation x data-parallel ranks as the trainer computes it."""

from __future__ import annotations

from typing import Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainstack.launchers import check_command, launch_notes, render_launch
from trainstack.launchers import intent
from trainstack.launchers.topology import Batch, Degrees, Topology
from trainstack.launchers.words import text_of

ENV = "TRAINSTACK_GRADIENT_ACCUMULATION_STEPS"
#: one command per launcher trainstack knows, and how its trainer reads the accumulation
COMMANDS = {
    "torchrun train.py --lr 1": "env",
    "python train.py": "env",
    "accelerate launch train.py": "env",
    "accelerate launch --use_deepspeed train.py": "env",
    "deepspeed train.py --deepspeed ds.json": "env",
    "bash run.sh": "env",
    "torchrun pretrain_gpt.py --micro-batch-size {micro}": "--global-batch-size",
    "torchrun -m torchtitan.train --job.config_file c.toml": "--training.global_batch_size",
    "tune run full_finetune_distributed --config llama3/8B_full": "gradient_accumulation_steps=",
    "swift sft --model Qwen/Qwen2.5-7B --dataset d": "--gradient_accumulation_steps",
    "llamafactory-cli train examples/train_full/llama3_full_sft.yaml": "gradient_accumulation_steps=",
}


def topology(nodes: int, nproc: int, micro: int, global_batch: Optional[int], accumulation: int = 1,
             seq: int = 2048, zero: int = 0) -> Topology:
    dp = nodes * nproc
    acc = -(-global_batch // (micro * dp)) if global_batch else accumulation
    batch = Batch(micro_batch_size=micro, sequence_length=seq, zero_stage=zero, accumulation=acc, data_parallel=dp,
                  global_batch_size=global_batch)
    return Topology(nnodes=nodes, nproc_per_node=nproc, hosts=tuple(f"10.0.0.{10 + i}" for i in range(nodes)),
                    degrees=Degrees(data=dp, micro_batches=acc), batch=batch)


def carried(command: str, t: Topology) -> int:
    """The accumulation the trainer of ``command`` runs with, read from its rendered launch."""
    launch = render_launch(command, t, 0)
    argv = [text_of(w) for w in launch.argv]
    env = {k: text_of(v) for k, v in launch.env}
    how = next(v for k, v in COMMANDS.items() if command.startswith(k.split(" {")[0].split(" --micro")[0]))
    if how == "env":
        return int(env[ENV])
    if how.endswith("="):
        (value,) = [w[len(how):] for w in argv if w.startswith(how)]
        return int(value)
    i = argv.index(how)
    value = int(argv[i + 1])
    b = t.batch
    return value // (b.micro_batch_size * b.data_parallel) if "global" in how else value


@settings(max_examples=200, deadline=None)
@given(command=st.sampled_from(sorted(COMMANDS)), nproc=st.sampled_from([1, 2, 8]), micro=st.sampled_from([1, 2, 4]),
       steps=st.sampled_from([1, 2, 3, 8]))
def test_the_global_batch_stays_put_on_1_2_and_4_nodes_for_every_launcher(command, nproc, micro, steps):
    """Issue 34: 256 -> 512 -> 1,024 on 1, 2, 4 nodes for every launcher but accelerate --use_deepspeed."""
    global_batch = micro * nproc * 4 * steps  # divisible on 1, 2 and 4 nodes
    command = command.format(micro=micro)
    for nodes in (1, 2, 4):
        t = topology(nodes, nproc, micro, global_batch)
        assert check_command(command, t) == [], (command, nodes)
        assert micro * carried(command, t) * nodes * nproc == global_batch, (command, nodes)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_without_a_global_batch_nothing_is_added(command):
    t = topology(2, 8, 1, None, accumulation=4)
    launch = render_launch(command.format(micro=1), t, 0)
    argv = [text_of(w) for w in launch.argv]
    assert ENV not in dict(launch.env) and not any("gradient_accumulation" in w or "global_batch" in w
                                                   or "global-batch" in w for w in argv[-2:])


@settings(max_examples=100, deadline=None)
@given(nodes=st.sampled_from([1, 2, 4]), steps=st.sampled_from([1, 4, 16]), explicit=st.booleans())
def test_accelerate_never_overrides_the_scripts_accumulator(nodes, steps, explicit):
    """Accelerate turns --gradient_accumulation_steps into ACCELERATE_GRADIENT_ACCUMULATION_STEPS, which
    beats Accelerator(gradient_accumulation_steps=4) in the script (issue 34: it ran with 16)."""
    t = topology(nodes, 8, 1, 8 * 4 * steps) if explicit else topology(nodes, 8, 1, None, accumulation=steps)
    for command in ("accelerate launch --use_deepspeed train.py", "accelerate launch train.py"):
        launch = render_launch(command, t, 0)
        assert "--gradient_accumulation_steps" not in [text_of(w) for w in launch.argv]
        assert not any(k.startswith("ACCELERATE_") for k, _ in launch.env)
    if explicit:
        (note,) = launch_notes("accelerate launch train.py", t)
        assert "cannot see" in note and "Accelerator(gradient_accumulation_steps=...)" in note and ENV in note


@pytest.mark.parametrize("command", [
    "swift sft --model m --gradient_accumulation_steps {k}",
    "llamafactory-cli train c.yaml gradient_accumulation_steps={k}",
    "tune run full_finetune_distributed --config c gradient_accumulation_steps={k}",
    "torchrun train.py --gradient_accumulation_steps {k}",
    "accelerate launch --use_deepspeed --gradient_accumulation_steps {k} train.py",
])
def test_a_value_the_command_gives_is_kept_when_it_agrees_and_refused_naming_both_when_not(command):
    t = topology(2, 8, 1, 64)  # accumulation 4 on 16 ranks
    agree = command.format(k=4)
    assert check_command(agree, t) == []
    argv = [text_of(w) for w in render_launch(agree, t, 0).argv]
    assert sum("gradient_accumulation_steps" in w for w in argv) == 1, "never a second value"
    (p,) = check_command(command.format(k=16), t)
    assert "says gradient accumulation 16" in p.message and "is 4" in p.message and p.given


#: (command with {v}, profile field, the plan's value, another value)
RESTATED = [
    ("swift sft --model m --deepspeed zero{v}", "zero_stage", 3, 2),
    ("swift sft --model m --deepspeed zero{v}_offload", "zero_stage", 3, 2),
    ("swift sft --model m --max_length {v}", "sequence_length", 32768, 4096),
    ("swift sft --model m --per_device_train_batch_size {v}", "micro_batch_size", 2, 8),
    ("llamafactory-cli train c.yaml deepspeed=examples/deepspeed/ds_z{v}_config.json", "zero_stage", 3, 2),
    ("llamafactory-cli train c.yaml cutoff_len={v}", "sequence_length", 32768, 4096),
    ("llamafactory-cli train c.yaml per_device_train_batch_size={v}", "micro_batch_size", 2, 8),
    ("torchrun pretrain_gpt.py --seq-length {v}", "sequence_length", 32768, 4096),
    ("torchrun pretrain_gpt.py --micro-batch-size={v}", "micro_batch_size", 2, 8),
    ("torchrun -m torchtitan.train --training.seq_len {v}", "sequence_length", 32768, 4096),
    ("torchrun -m torchtitan.train --training.local_batch_size {v}", "micro_batch_size", 2, 8),
    ("tune run full_finetune_distributed --config c batch_size={v}", "micro_batch_size", 2, 8),
    ("tune run full_finetune_distributed --config c tokenizer.max_seq_len={v}", "sequence_length", 32768, 4096),
    ("accelerate launch --use_deepspeed --zero_stage {v} train.py", "zero_stage", 3, 2),
    ("accelerate launch train.py --per_device_train_batch_size {v}", "micro_batch_size", 2, 8),
    ("deepspeed train.py --zero_stage {v}", "zero_stage", 3, 1),
    ("python train.py --max_seq_length {v}", "sequence_length", 32768, 4096),
    ("torchrun train.py --model_max_length {v}", "sequence_length", 32768, 4096),
]


@pytest.mark.parametrize("command, field, plan_value, other", RESTATED, ids=[r[0].split("{")[0] + r[1] for r in RESTATED])
def test_an_option_restating_the_profile_must_agree_and_names_both(command, field, plan_value, other):
    values = {"zero_stage": 0, "sequence_length": 2048, "micro_batch_size": 1, field: plan_value}
    t = topology(2, 8, values["micro_batch_size"], None, seq=values["sequence_length"], zero=values["zero_stage"])
    assert check_command(command.format(v=plan_value), t) == []
    (p,) = check_command(command.format(v=other), t)
    words, profile_field = intent.FIELDS[field]
    assert f"says {words} {other}" in p.message and f"{profile_field} is {plan_value}" in p.message
    assert p.path == "job.command" and p.given.lstrip("-").split("=")[0]


@pytest.mark.parametrize("command", ["swift sft --model m --deepspeed ds_config.json",
                                     "python train.py --max_seq_length auto", "tune run r --config c batch_size=$BS"])
def test_a_value_trainstack_cannot_read_is_left_to_the_program(command):
    assert check_command(command, topology(1, 8, 1, None, seq=4096, zero=3)) == []


@settings(max_examples=150, deadline=None)
@given(name=st.sampled_from(["NNODES", "NPROC_PER_NODE", "NODE_RANK", "MASTER_PORT", "MASTER_ADDR"]),
       tool=st.sampled_from(["llamafactory-cli train c.yaml", "swift sft --model m", "bash run.sh"]),
       nodes=st.sampled_from([1, 2]), delta=st.sampled_from([0, 1]))
def test_readme_env_forms_are_accepted_when_they_agree_with_the_plan(name, tool, nodes, delta):
    t = topology(nodes, 8, 1, None)
    plan = {"NNODES": nodes, "NPROC_PER_NODE": 8, "NODE_RANK": 0, "MASTER_PORT": 29500}
    value = f"10.0.0.{10 + delta}" if name == "MASTER_ADDR" else str(plan[name] + delta)
    agrees = delta == 0 and not (name == "NODE_RANK" and nodes > 1)
    problems = check_command(f"{name}={value} {tool}", t)
    assert (problems == []) == agrees, (name, value, nodes, problems)
    if agrees:
        launch = render_launch(f"{name}={value} {tool}", t, 0)
        assert launch.user_env == (), "trainstack writes the plan's value itself"
    else:
        assert f"{name}={value}" in problems[0].message


def test_force_torchrun_is_llamafactorys_switch():
    t = topology(2, 8, 1, None)
    for value in ("1", "true", "Y"):
        assert check_command(f"FORCE_TORCHRUN={value} llamafactory-cli train c.yaml", t) == []
    assert check_command("FORCE_TORCHRUN=0 llamafactory-cli train c.yaml", t)
    assert check_command("FORCE_TORCHRUN=1 swift sft --model m", t), "swift does not read it"


@pytest.mark.parametrize("command", ["llamafactory-cli train c.yaml", "swift sft --model m"])
def test_llamafactory_and_swift_get_the_plans_rendezvous_timeout_through_torchruns_environment(command):
    t = Topology(nnodes=2, nproc_per_node=8, hosts=("10.0.0.10", "10.0.0.11"), rdzv_timeout_seconds=1800)
    env = {k: text_of(v) for k, v in render_launch(command, t, 1).env}
    assert env["PET_RDZV_CONF"] == "timeout=1800"


def test_a_program_with_no_channel_is_refused_when_the_batch_follows_the_nodes(monkeypatch):
    doc = {**intent._doc(), "kinds": {**intent._doc()["kinds"], "script": {"accumulation": {"channel": "none"}}}}
    monkeypatch.setattr(intent, "_doc", lambda: doc)
    (p,) = check_command("bash run.sh", topology(2, 8, 1, 64))
    assert "global_batch_size 64 needs gradient accumulation 4" in p.message
    assert check_command("bash run.sh", topology(2, 8, 1, None)) == []


def test_every_kind_names_its_channel_and_source():
    kinds = intent._doc()["kinds"]
    assert set(kinds) == {"megatron", "torchtitan", "tune", "swift", "llamafactory", "accelerate", "script"}
    for name, kind in kinds.items():
        assert kind["accumulation"]["channel"] in ("flag", "key", "env", "none") and kind["source"], name
        assert set(kind["restated"]) <= set(intent.FIELDS), name
