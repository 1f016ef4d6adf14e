"""Each launcher gets the plan's topology the way its tool documents, keeps the user's other
options, and refuses exactly what cannot work, with the reason and the fix."""

from __future__ import annotations

import pytest
from documented import parse

from trainstack.launchers import LaunchError, Topology, check_command, dlc_command, render_launch
from trainstack.launchers.words import text_of

TWO_NODES = Topology(nnodes=2, nproc_per_node=8, hosts=("10.0.0.10", "10.0.0.11"))
DLC = Topology(nnodes=2, nproc_per_node=8, platform="dlc")
HOSTFILE = "/etc/trainstack/deepspeed-hostfile"


def argv(command: str, rank: int = 1, topology: Topology = TWO_NODES, **kw) -> list[str]:
    launch = render_launch(command, topology, rank, deepspeed_hostfile=HOSTFILE, **kw)
    return [text_of(w) for w in launch.argv]


def env(command: str, rank: int = 1) -> dict[str, str]:
    return {k: text_of(w) for k, w in render_launch(command, TWO_NODES, rank).env}


def messages(command: str, topology=TWO_NODES) -> list[str]:
    return [p.message for p in check_command(command, topology)]


def test_torchrun_gets_its_documented_topology_flags_and_keeps_the_rest():
    opts, program = parse(argv("torchrun --max-restarts=2 --nnodes 2 --nproc_per_node=8 train.py --lr 1")[1:],
                          "torchrun")
    assert (opts["--nnodes"], opts["--nproc-per-node"], opts["--node-rank"]) == ("2", "8", "1")
    assert (opts["--master-addr"], opts["--master-port"], opts["--max-restarts"]) == ("10.0.0.10", "29500", "2")
    assert opts["--rdzv-conf"] == "timeout=1800" and program == ["train.py", "--lr", "1"]


@pytest.mark.parametrize("command, program", [
    ("python train.py --config c.yaml", ["train.py", "--config", "c.yaml"]),
    ("python3 -u -W ignore train.py", ["train.py"]),
    ("/opt/venv/bin/python3.11 -m pkg.train --lr 1", ["pkg.train", "--lr", "1"]),
    ("python -m torch.distributed.run --nnodes 2 train.py", ["train.py"]),
])
def test_python_runs_under_torchrun_one_process_per_gpu(command, program):
    words = argv(command)
    head = 3 if "torch.distributed.run" in command else 1
    opts, rest = parse(words[head:], "torchrun")
    assert opts["--nproc-per-node"] == "8" and rest == program
    assert ("-m" in command and "torch.distributed" not in command) == ("--module" in opts)


def test_accelerate_gets_machines_total_processes_and_rank_and_never_pdsh():
    words = argv("accelerate launch --use_deepspeed --mixed_precision bf16 train.py --x 1", gradient_accumulation_steps=4)
    assert words[:2] == ["accelerate", "launch"]
    opts, program = parse(words[2:], "accelerate")
    assert (opts["--num_machines"], opts["--num_processes"], opts["--machine_rank"]) == ("2", "16", "1")
    assert (opts["--main_process_ip"], opts["--main_process_port"]) == ("10.0.0.10", "29500")
    assert opts["--deepspeed_multinode_launcher"] == "standard" and "--multi_gpu" not in opts
    # never --gradient_accumulation_steps: Accelerate turns it into ACCELERATE_GRADIENT_ACCUMULATION_STEPS,
    # which overrode the script's own Accelerator(gradient_accumulation_steps=4) (issue 34: it ran with 16)
    assert "--gradient_accumulation_steps" not in opts and opts["--mixed_precision"] == "bf16"
    assert program == ["train.py", "--x", "1"]
    plain, _ = parse(argv("accelerate launch train.py")[2:], "accelerate")
    assert plain["--multi_gpu"] == "true", "without a mode Accelerate would start one process on this node"
    configured, _ = parse(argv("accelerate launch --config_file fsdp.yaml train.py")[2:], "accelerate")
    assert "--multi_gpu" not in configured, "the config file names the mode"


def test_deepspeed_runs_per_node_without_ssh_from_a_hostfile_of_the_plans_nodes():
    launch = render_launch("deepspeed --bind_cores_to_rank train.py --deepspeed ds.json", TWO_NODES, 1,
                           deepspeed_hostfile=HOSTFILE)
    opts, program = parse([text_of(w) for w in launch.argv][1:], "deepspeed")
    assert opts["--no_ssh"] == "true" and opts["--node_rank"] == "1" and opts["--hostfile"] == HOSTFILE
    assert (opts["--master_addr"], opts["--master_port"], opts["--num_nodes"], opts["--num_gpus"]) == (
        "10.0.0.10", "29500", "2", "8")
    assert opts["--bind_cores_to_rank"] == "true" and program == ["train.py", "--deepspeed", "ds.json"]
    assert launch.hostfile == "10.0.0.10 slots=8\n10.0.0.11 slots=8\n"


@pytest.mark.parametrize("command, extra", [
    # PET_RDZV_CONF: their own torchrun call takes no --rdzv-conf; torchrun reads it from the environment
    ("llamafactory-cli train examples/llama3_lora_sft.yaml", {"FORCE_TORCHRUN": "1", "PET_RDZV_CONF": "timeout=1800"}),
    ("swift sft --model Qwen/Qwen2.5-7B --dataset d", {"PET_RDZV_CONF": "timeout=1800"}),
    ("bash run.sh --fast", {}),
])
def test_environment_launchers_read_the_names_their_source_reads(command, extra):
    assert env(command) == {**extra, "NNODES": "2", "NODE_RANK": "1", "NPROC_PER_NODE": "8",
                            "MASTER_ADDR": "10.0.0.10", "MASTER_PORT": "29500"}
    assert argv(command) == command.split(), "the command itself is unchanged"


def test_tune_run_names_the_rendezvous_endpoint_so_it_is_not_standalone():
    words = argv("tune run --max-restarts 1 full_finetune_distributed --config llama3/8B_full")
    assert words[:2] == ["tune", "run"]
    opts, program = parse(words[2:], "torchrun")
    assert opts["--rdzv-endpoint"] == "10.0.0.10:29500" and opts["--node-rank"] == "1" and opts["--nnodes"] == "2"
    assert "--standalone" not in opts and program == ["full_finetune_distributed", "--config", "llama3/8B_full"]


def test_torchtitan_through_torchrun():
    opts, program = parse(argv("torchrun -m torchtitan.train --job.config_file llama3_8b.toml")[1:], "torchrun")
    assert opts["--module"] == "true" and program == ["torchtitan.train", "--job.config_file", "llama3_8b.toml"]


@pytest.mark.parametrize("command, fragment", [
    ("torchrun --nnodes 4 train.py", "the plan runs 2 node(s)"),
    ("torchrun --node-rank 0 train.py", "gets its own rank"),
    ("torchrun --nproc-per-node 4 train.py", "8 process(es) per node"),
    ("torchrun --master-addr 10.9.9.9 train.py", "node 0 (10.0.0.10)"),
    ("torchrun --rdzv-backend c10d train.py", "static rendezvous"),
    ("torchrun --rdzv-endpoint h:1 train.py", "the rendezvous is 10.0.0.10:29500"),
    ("torchrun --standalone train.py", "single-node rendezvous"),
    ("accelerate launch --num_processes 8 train.py", "16 process(es) in all"),
    ("accelerate launch --use_deepspeed --deepspeed_multinode_launcher pdsh train.py", "needs SSH"),
    ("deepspeed --include localhost:0,1 train.py", "--num_gpus"),
    ("deepspeed --hostfile /job/hostfile train.py", "hostfile of the plan's nodes"),
    ("deepspeed --num_nod 3 train.py", "the plan runs 2 node(s)"),  # argparse abbreviation
    ("mpirun -np 16 python train.py", "over SSH"),
    ("llamafactory-cli train --output_dir 'my dir' c.yaml", "whitespace"),
    ("llamafactory-cli export c.yaml", "not a training run"),
    ("swift infer --model m", "not a training run"),
    ("tune run full_finetune_distributed", "needs --config"),
    ("bash torchtitan/run_train.sh", "single-node rendezvous"),
    ("NNODES=4 python train.py", "sets NNODES"),
    ("PET_NNODES=4 python train.py", "sets PET_NNODES"),
    ("accelerate launch --made_up x train.py", "not an option of accelerate launch"),
    ("python -c 'print(1)'", "python -c"),
    ("python train.py 'unbalanced", "shell quoting"),
])
def test_what_cannot_work_is_refused_with_reason_and_fix(command, fragment):
    (message,) = messages(command)
    assert fragment in message and "; fix: " in message


def test_agreeing_topology_flags_and_unknown_equals_options_are_accepted():
    assert messages("torchrun --nnodes 2 --nproc-per-node gpu --master-port 29500 train.py") == []
    assert messages("accelerate launch --num_machines 2 --num_processes 16 --made_up=x train.py") == []
    assert messages("torchrun --standalone train.py", Topology(1, 8, hosts=("10.0.0.10",))) == []


def test_without_a_plan_only_the_plan_independent_rules_apply():
    assert messages("torchrun --nnodes 4 train.py", None) == []
    assert messages("mpirun python train.py", None) and messages("tune run r", None)


def test_a_refusal_names_only_the_offending_option_never_the_command():
    (p,) = check_command("HF_X=hf_abcdefghijklmnopqrstuvwxyz torchrun --nnodes 4 train.py", TWO_NODES)
    assert p.given == "--nnodes 4" and "hf_abc" not in p.render()
    with pytest.raises(LaunchError) as err:
        render_launch("torchrun --nnodes 4 train.py", TWO_NODES, 0)
    assert [q.render() for q in err.value.problems] == [q.render() for q in check_command(
        "torchrun --nnodes 4 train.py", TWO_NODES)]


def test_dlc_maps_pai_world_size_and_rank_to_nodes_explicitly():
    cmd = dlc_command("torchrun --nnodes 2 train.py", DLC)
    assert cmd == ('torchrun --nnodes "${WORLD_SIZE:-1}" --nproc-per-node 8 --node-rank "${RANK:-0}" '
                   '--master-addr "${MASTER_ADDR:-127.0.0.1}" --master-port "${MASTER_PORT:-29500}" '
                   "--rdzv-conf timeout=1800 train.py")
    lf = dlc_command("llamafactory-cli train c.yaml", DLC)
    assert lf.startswith('export FORCE_TORCHRUN=1 NNODES="${WORLD_SIZE:-1}" NODE_RANK="${RANK:-0}" NPROC_PER_NODE=8 ')
    ds = dlc_command("deepspeed train.py", DLC)
    assert ds.startswith("printf '%s\\n' 'node-0 slots=8' 'node-1 slots=8' > /tmp/trainstack-deepspeed-hostfile && ")
    assert "--num_processes 16" in dlc_command("accelerate launch train.py", DLC)
    (p,) = check_command("torchrun --master-port 1234 train.py", DLC)
    assert "MASTER_PORT" in p.message


def test_dlc_command_runs_in_a_posix_shell_with_pais_variables(tmp_path):
    import subprocess

    script = dlc_command("bash -c 'echo $NNODES $NODE_RANK $MASTER_ADDR:$MASTER_PORT $NPROC_PER_NODE' x", DLC)
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, timeout=30,
                         env={"PATH": "/usr/bin:/bin", "WORLD_SIZE": "2", "RANK": "1", "MASTER_ADDR": "dlc-master-0",
                              "MASTER_PORT": "23456"})
    assert out.stdout.split() == ["2", "1", "dlc-master-0:23456", "8"]
