"""The ``trainstack`` command line: parse arguments, run one command, map errors to exit codes.

Each command lives in ``trainstack/commands/<name>.py`` and exposes ``register(subparsers)``,
which adds its parser and sets ``func(args) -> int``. A :class:`TrainstackError` becomes
its message on stderr (or JSON on stdout with ``--json``) and its exit code; a user mistake
never shows a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import importlib.util
import json
import sys
from typing import Callable, Optional, Sequence

from .errors import EXIT_BAD_INPUT, TrainstackError
from .outputs import OutputError, guarded_stdout, silence_broken_stdout

COMMANDS = ("validate", "estimate", "resolve", "plan", "diff", "catalog", "schema", "preflight", "node-files", "status",
            "calibrate", "up")


#: One-shot computations: they build many short-lived objects and almost no reference cycles,
#: so the cyclic collector would only rescan live data while they run (measured on a 512-node
#: plan: 28.3 s -> 23.8 s at peak RSS 509 -> 517 MB; 8 nodes: ~0.3 s of 2.3 s). Commands that
#: talk to the cloud or wait keep the collector.
PAUSED_COLLECTOR = frozenset({"validate", "estimate", "resolve", "plan", "diff", "node-files"})


@contextlib.contextmanager
def collector_paused(process_ends: bool = False):
    """The cyclic garbage collector off for the block (reference counting still frees memory);
    the block calls the yielded ``resume()`` to turn it back on early. A caller that goes on
    (tests run commands in-process) gets it back as it was; when the process ends right after
    (``process_ends``), what the command built is frozen first, so neither the next collection
    nor the interpreter's exit rescans it all (~0.2 s at 8 nodes)."""
    was_enabled = gc.isenabled()
    gc.disable()

    def resume() -> None:
        if was_enabled:
            gc.enable()

    try:
        yield resume
    finally:
        if was_enabled and not gc.isenabled():
            if process_ends:
                gc.freeze()
            gc.enable()


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
    """Run one command; ``argv=None`` (the console script, ``python -m trainstack``) reads this
    process's own command line, and the process ends when it returns."""
    with collector_paused(process_ends=argv is None) as resume_collector:
        return _run(argv, resume_collector)


def _run(argv: Optional[Sequence[str]], resume_collector: Callable[[], None]) -> int:
    parser = build_parser()  # importing the commands allocates only what lives on
    args = parser.parse_args(argv)
    if args.command not in PAUSED_COLLECTOR:
        resume_collector()
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
