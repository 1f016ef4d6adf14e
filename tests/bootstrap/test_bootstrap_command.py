"""job.command -> torchrun arguments."""

import pytest

from trainstack.bootstrap import parse_command


@pytest.mark.parametrize("command, options, program", [
    ("python train.py --config cfg.yaml", (), ("train.py", "--config", "cfg.yaml")),
    ("python3 -u -W ignore train.py", (), ("train.py",)),
    ("/opt/venv/bin/python3.11 train.py", (), ("train.py",)),
    ("python -m pkg.train --lr 1", ("-m",), ("pkg.train", "--lr", "1")),
    ("torchrun train.py --zero 3", (), ("train.py", "--zero", "3")),
    ("torchrun --max-restarts=2 --monitor-interval 5 -m pkg.train", ("--max-restarts=2", "--monitor-interval",
                                                                       "5", "-m"), ("pkg.train",)),
    ("python -m torch.distributed.run --nnodes 2 train.py", (), ("train.py",)),
    ("bash run.sh --fast", ("--no-python",), ("bash", "run.sh", "--fast")),
    ("./train.sh", ("--no-python",), ("./train.sh",)),
])
def test_commands_become_torchrun_arguments(command, options, program):
    parsed = parse_command(command)
    assert (parsed.torchrun_options, parsed.program) == (options, program)


def test_the_plans_topology_replaces_the_commands():
    parsed = parse_command("torchrun --standalone --nproc_per_node=8 --nnodes 2 --node-rank 1 "
                           "--master-addr h --master_port 1 --rdzv-backend c10d --max-restarts 1 train.py")
    assert parsed.torchrun_options == ("--max-restarts", "1")
    assert parsed.dropped == ("--standalone", "--nproc_per_node=8", "--nnodes", "2", "--node-rank", "1",
                              "--master-addr", "h", "--master_port", "1", "--rdzv-backend", "c10d")


def test_leading_assignments_become_job_environment():
    parsed = parse_command("NCCL_DEBUG=WARN OMP_NUM_THREADS=4 python train.py A=B")
    assert parsed.env == {"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": "4"}
    assert parsed.program == ("train.py", "A=B")


@pytest.mark.parametrize("command, message", [
    ("", "no program"),
    ("FOO=1", "no program"),
    ("python", "without a script"),
    ("python -c 'print(1)'", "python -c"),
    ("torchrun --nnodes 2", "without a script"),
    ("deepspeed train.py", "launcher"),
    ("accelerate launch train.py", "launcher"),
    ("python 'unterminated", "shell quoting"),
])
def test_commands_trainstack_cannot_launch_are_refused(command, message):
    with pytest.raises(ValueError, match=message):
        parse_command(command)
