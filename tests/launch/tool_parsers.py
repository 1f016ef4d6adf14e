"""The launch tools' own argument parsers, imported from the pinned packages of
requirements-launch.txt (they need PyTorch, so only ``make test-launch`` imports this).

``documented_options(tool)`` turns a parser into the shape of
``trainstack/launchers/data/<tool>.yaml``; ``python tests/launch/tool_parsers.py --write``
rewrites those files from the installed versions (run it when a pin moves, then review the diff).
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version
from pathlib import Path

import yaml

DATA = Path(__file__).resolve().parents[2] / "trainstack" / "launchers" / "data"

SOURCES = {
    "torchrun": ("torch", "https://github.com/pytorch/pytorch/blob/v{v}/torch/distributed/run.py",
                 "torch.distributed.run.get_args_parser()"),
    "accelerate": ("accelerate", "https://github.com/huggingface/accelerate/blob/v{v}/src/accelerate/commands/launch.py",
                   "accelerate.commands.launch.launch_command_parser()"),
    "deepspeed": ("deepspeed", "https://github.com/deepspeedai/DeepSpeed/blob/v{v}/deepspeed/launcher/runner.py",
                  "deepspeed.launcher.runner.parse_args()"),
}


def torchrun_parser() -> argparse.ArgumentParser:
    from torch.distributed.run import get_args_parser

    return get_args_parser()


def accelerate_parser() -> argparse.ArgumentParser:
    from accelerate.commands.launch import launch_command_parser

    return launch_command_parser()


def deepspeed_parser() -> argparse.ArgumentParser:
    """DeepSpeed builds its parser inside parse_args(); catch it there."""
    from deepspeed.launcher import runner

    caught: list[argparse.ArgumentParser] = []

    class _Caught(Exception):
        pass

    original = argparse.ArgumentParser.parse_args

    def grab(self, *args, **kwargs):
        caught.append(self)
        raise _Caught

    argparse.ArgumentParser.parse_args = grab
    try:
        runner.parse_args([])
    except _Caught:
        pass
    finally:
        argparse.ArgumentParser.parse_args = original
    return caught[0]


PARSERS = {"torchrun": torchrun_parser, "accelerate": accelerate_parser, "deepspeed": deepspeed_parser}


def documented_options(tool: str) -> dict:
    package, url, where = SOURCES[tool]
    parser = PARSERS[tool]()
    options = []
    for action in parser._actions:
        if not action.option_strings or isinstance(action, argparse._HelpAction):
            continue
        options.append({"names": list(action.option_strings), "value": action.nargs != 0})
    v = version(package)
    return {"tool": tool, "package": package, "version": v, "source": url.format(v=v), "parser": where,
            "allow_abbrev": bool(parser.allow_abbrev), "options": options}


def main(argv: list[str]) -> int:
    for tool in PARSERS:
        doc = documented_options(tool)
        text = (f"# Options of {tool} as its own parser defines them ({doc['parser']}, {doc['package']} "
                f"{doc['version']}),\n# written by tests/launch/tool_parsers.py --write; make test-launch checks "
                "this file against that parser.\n" + yaml.safe_dump(doc, sort_keys=False, width=120))
        if "--write" in argv:
            (DATA / f"{tool}.yaml").write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
