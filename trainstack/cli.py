"""The ``trainstack`` command line: parse arguments, run one command, map errors to exit codes.

Each command lives in ``trainstack/commands/<name>.py`` and exposes ``register(subparsers)``,
which adds its parser and sets ``func(args) -> int``. A :class:`TrainstackError` becomes
its message on stderr (or JSON on stdout with ``--json``) and its exit code; a user mistake
never shows a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
from typing import Optional, Sequence

from .errors import EXIT_BAD_INPUT, TrainstackError
from .outputs import OutputError, guarded_stdout, silence_broken_stdout

COMMANDS = ("validate", "estimate", "resolve", "plan", "diff", "catalog", "schema", "preflight", "node-files", "status",
            "calibrate")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its usage line
        self.print_usage(sys.stderr)
        sys.stderr.write(f"trainstack: error: {message}\n")
        raise SystemExit(EXIT_BAD_INPUT)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="trainstack", description="Size, place, provision and police GPU training on Alibaba Cloud.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for name in COMMANDS:
        module = name.replace("-", "_")
        if importlib.util.find_spec(f"{__package__}.commands.{module}") is None:
            continue  # a command not built yet in this checkout
        importlib.import_module(f".commands.{module}", __package__).register(sub)
    return parser


def emit_error(err: TrainstackError, as_json: bool) -> int:
    """The error on stderr (and as JSON on stdout with ``--json``); stdout that cannot be written
    (the reason for an OutputError, often) is skipped, stderr still says what went wrong."""
    if as_json and not isinstance(err, OutputError):
        try:
            print(json.dumps(err.to_dict(), indent=2, default=str, allow_nan=False))
            sys.stdout.flush()
        except (OSError, ValueError):
            pass
    for i, line in enumerate(err.lines()):
        first = i == 0 or (err.problems and i < len(err.problems))
        print(f"trainstack: {line}" if first else line, file=sys.stderr)
    return err.exit_code


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    as_json = bool(getattr(args, "json", False) or getattr(args, "format", None) == "json")
    try:
        with guarded_stdout():
            return int(args.func(args) or 0)
    except TrainstackError as err:
        if isinstance(err, OutputError) and err.on_stdout:
            silence_broken_stdout()  # what is still buffered must not fail again at exit
        return emit_error(err, as_json)
    except KeyboardInterrupt:
        print("trainstack: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `trainstack plan | head`: the reader has what it wanted
        silence_broken_stdout()
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
