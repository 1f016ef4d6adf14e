"""LLaMA-Factory's and ms-swift's own launch code over what trainstack renders (``make test-launch``).

Both tools start torchrun themselves from environment variables. Their training dependencies are too
heavy for the launch venv, so their PyPI wheels are installed without dependencies
(requirements-launch-nodeps.txt) and the one module that builds the torchrun call runs for real:
``llamafactory/launcher.py`` (``launch()``) and ``swift/cli/main.py`` (``cli_main()``), loaded from
the installed wheel into a scratch package whose other modules (logging, device count, the training
entry points) are stubs; LLaMA-Factory's ``is_env_enabled`` is taken from its own
``extras/misc.py``. ``subprocess.run`` is replaced to capture the command and environment they start
torchrun with, and torch's own parser (``torch.distributed.run.get_args_parser``) reads that command
in that environment: the rendezvous timeout (``PET_RDZV_CONF``), topology and the accumulation
override all arrive as trainstack planned them.
"""

from __future__ import annotations

import ast
import importlib
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainstack.launchers import render_launch
from trainstack.launchers.topology import Batch, Degrees, Topology
from trainstack.launchers.words import text_of

pytest.importorskip("torch")

TWO = Topology(nnodes=2, nproc_per_node=8, hosts=("10.0.0.10", "10.0.0.11"), degrees=Degrees(data=16, micro_batches=4),
               batch=Batch(micro_batch_size=1, sequence_length=2048, zero_stage=0, accumulation=4, data_parallel=16,
                           global_batch_size=64))


def wheel_file(dist: str, path: str) -> str:
    try:
        located = importlib.metadata.distribution(dist).locate_file(path)
    except importlib.metadata.PackageNotFoundError:
        pytest.skip(f"{dist} is not installed (make test-launch installs it without dependencies)")
    return Path(str(located)).read_text(encoding="utf-8")


def function_source(module_text: str, name: str) -> str:
    tree = ast.parse(module_text)
    node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
    return ast.get_source_segment(module_text, node)


def scratch(tmp_path: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text, encoding="utf-8")
    sys.path.insert(0, str(tmp_path))


@pytest.fixture
def captured(monkeypatch):
    calls = []

    def run(args, env=None, check=False, **kw):
        calls.append((list(args), dict(env if env is not None else os.environ)))
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(subprocess, "run", run)
    yield calls
    for name in [m for m in sys.modules if m.split(".")[0] in ("llamafactory", "swift")]:
        del sys.modules[name]


def node_environment(monkeypatch, command: str, rank: int) -> list[str]:
    """The node's environment as trainstack renders it for ``command``; returns the trainer's argv."""
    launch = render_launch(command, TWO, rank)
    for name in [k for k in os.environ if k.startswith("PET_") or k in ("NNODES", "NODE_RANK", "FORCE_TORCHRUN")]:
        monkeypatch.delenv(name)
    for k, v in (*launch.user_env, *((k, text_of(w)) for k, w in launch.env)):
        monkeypatch.setenv(k, v)
    return [text_of(w) for w in launch.argv]


def torchrun_reads(args: list[str], env: dict[str, str], monkeypatch):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    from torch.distributed.run import get_args_parser

    return get_args_parser().parse_args(args)  # PET_* defaults are read when the parser is built


def test_llamafactory_starts_torchrun_with_the_plans_rendezvous_and_accumulation(tmp_path, monkeypatch, captured):
    misc = wheel_file("llamafactory", "llamafactory/extras/misc.py")
    scratch(tmp_path, {
        "llamafactory/__init__.py": "",
        "llamafactory/launcher.py": wheel_file("llamafactory", "llamafactory/launcher.py"),
        "llamafactory/extras/__init__.py": "",
        "llamafactory/extras/logging.py": "import logging\nclass _L(logging.Logger):\n    def info_rank0(self, *a):\n"
                                          "        pass\ndef get_logger(name):\n    return _L(name)\n",
        "llamafactory/extras/env.py": "VERSION = '0.9.5'\ndef print_env():\n    pass\n",
        "llamafactory/extras/misc.py": "import os\n" + function_source(misc, "is_env_enabled") +
                                       "\ndef find_available_port():\n    return 0\ndef get_device_count():\n    return 8\n"
                                       "def use_ray():\n    return False\ndef use_kt():\n    return False\n",
    })
    argv = node_environment(monkeypatch, "FORCE_TORCHRUN=1 llamafactory-cli train cfg.yaml", 1)
    assert argv[-1] == "gradient_accumulation_steps=4"
    monkeypatch.setattr(sys, "argv", ["llamafactory-cli", *argv[1:]])
    with pytest.raises(SystemExit):
        importlib.import_module("llamafactory.launcher").launch()
    (args, env), = captured
    assert args[0] == "torchrun"
    got = torchrun_reads(args[1:], env, monkeypatch)
    assert got.rdzv_conf == "timeout=1800", "torch's default would be 900 s"
    assert (got.nnodes, got.node_rank, got.nproc_per_node, got.master_addr, got.master_port) == (
        "2", 1, "8", "10.0.0.10", 29500)
    assert got.training_script_args == ["cfg.yaml", "gradient_accumulation_steps=4"]
    assert env["TRAINSTACK_GRADIENT_ACCUMULATION_STEPS"] == "4"


def test_swift_starts_torchrun_with_the_plans_rendezvous_and_accumulation(tmp_path, monkeypatch, captured):
    scratch(tmp_path, {
        "swift/__init__.py": "",
        "swift/utils.py": "import logging\ndef get_logger():\n    return logging.getLogger('swift')\n",
        "swift/cli/__init__.py": "",
        "swift/cli/main.py": wheel_file("ms-swift", "swift/cli/main.py"),
        "swift/cli/sft.py": "",
    })
    argv = node_environment(monkeypatch, "NPROC_PER_NODE=8 swift sft --model m --dataset d", 1)
    assert argv[-2:] == ["--gradient_accumulation_steps", "4"]
    monkeypatch.setattr(sys, "argv", argv)
    importlib.import_module("swift.cli.main").cli_main()
    (args, env), = captured
    assert args[1:3] == ["-m", "torch.distributed.run"]
    got = torchrun_reads(args[3:], env, monkeypatch)
    assert got.rdzv_conf == "timeout=1800", "torch's default would be 900 s"
    assert (got.nnodes, got.node_rank, got.nproc_per_node, got.master_addr, got.master_port) == (
        "2", 1, "8", "10.0.0.10", 29500)
    assert got.training_script_args[-2:] == ["--gradient_accumulation_steps", "4"]
