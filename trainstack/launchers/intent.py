"""Launch intent: what ``job.command`` says about the batch agrees with the plan, and the plan's
gradient accumulation reaches the trainer (data/intent.yaml says how, per program).

* **Restated options.** An option of the command that restates a profile field (ZeRO stage,
  sequence length, micro-batch, accumulation, global batch) must say what the plan was sized for:
  ``swift sft --deepspeed zero2`` on a ``zero_stage: 3`` plan, or Megatron's ``--seq-length 4096``
  on a 32,768-token profile, is refused naming both (exit 2). A value trainstack cannot read (a
  config file's name, ``$VAR``, ``auto``) is left to the program.
* **Accumulation.** With ``training.global_batch_size`` set, the plan's accumulation is the one that
  keeps that global batch at the plan's node count. It reaches the trainer as an option where the
  program takes one (``--global-batch-size`` for Megatron, ``gradient_accumulation_steps=N`` for
  torchtune and LLaMA-Factory, ...) and always as ``TRAINSTACK_GRADIENT_ACCUMULATION_STEPS`` in its
  environment (what a ``torchrun train.py`` / ``python`` script reads: docs/launchers.md). A value
  the command gives itself is never overridden: it agrees, or the command is refused. A value set
  inside the code (``Accelerator(gradient_accumulation_steps=4)``, a config file's) trainstack cannot
  see: it sets nothing that would override it (never ACCELERATE_GRADIENT_ACCUMULATION_STEPS), and
  :func:`notes` says so. A program with no channel at all is refused when the batch follows the nodes.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Optional

from ..errors import Problem
from .base import Command, problem
from .options import data, facts, scan
from .topology import Batch

#: profile field -> (words for messages, the profile's field)
FIELDS = {"micro_batch_size": ("micro-batch", "training.micro_batch_size"),
          "sequence_length": ("sequence length", "training.sequence_length"),
          "zero_stage": ("ZeRO stage", "training.zero_stage"),
          "gradient_accumulation_steps": ("gradient accumulation", "the plan's gradient accumulation"),
          "global_batch_size": ("global batch", "training.global_batch_size")}


@functools.lru_cache(maxsize=1)
def _doc() -> dict:
    return data("intent")


def env_name() -> str:
    return str(_doc()["env_name"])


@dataclass(frozen=True)
class Site:
    """Where in the command a program's options are read: its kind (data/intent.yaml) and the
    (option, value) pairs given there."""

    kind: str
    given: tuple[tuple[str, Optional[str]], ...]


def _pairs(args: tuple[str, ...], keys: bool) -> tuple[tuple[str, Optional[str]], ...]:
    """``--opt value`` / ``--opt=value`` (and ``key=value`` overrides when ``keys``) among ``args``."""
    out, i = [], 0
    while i < len(args):
        word = args[i]
        if word.startswith("-") and len(word) > 1:
            name, eq, value = word.partition("=")
            if eq:
                out.append((name, value))
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                out.append((name, args[i + 1]))
                i += 1
            else:
                out.append((name, None))
        elif keys and "=" in word:
            name, _, value = word.partition("=")
            out.append((name, value))
        i += 1
    return tuple(out)


def _program_site(program: tuple[str, ...], cmd: Command) -> Site:
    from . import parallel

    k = parallel.kind(cmd) if cmd.tool in ("torchrun", "python") else None
    if k is None and cmd.tool == "deepspeed" and program:
        k = "megatron" if program[0].rsplit("/", 1)[-1] in parallel._facts()["megatron"]["scripts"] else None
    return Site(k if k in ("megatron", "torchtitan") else "script", _pairs(program[1:], keys=False))


def sites(cmd: Command) -> list[Site]:
    """The programs ``cmd`` runs, with what it gives each."""
    from . import parallel

    if cmd.tool in ("torchrun", "python"):
        return [_program_site(parallel._torchrun_program(cmd), cmd)]
    if cmd.tool == "tune":
        return [Site("tune", _pairs(parallel._torchrun_program(cmd)[1:], keys=True))]
    if cmd.tool == "swift":
        return [Site("swift", _pairs(cmd.args, keys=False))]
    if cmd.tool == "llamafactory":
        return [Site("llamafactory", _pairs(cmd.args[1:], keys=True))]
    if cmd.tool in ("accelerate", "deepspeed"):
        found = scan(cmd.args, facts(cmd.tool))
        program = _program_site(found.program, cmd)
        if cmd.tool == "accelerate":
            return [Site("accelerate", tuple((o.canonical, o.value) for o in found.options)), program]
        return [program]
    return [Site("script", _pairs(cmd.args, keys=False))]


def _value(text: Optional[str], pattern: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    if pattern is not None:
        m = re.search(pattern, text)
        return int(m.group(1)) if m else None
    try:
        return int(text.strip())
    except ValueError:
        return None  # auto, $VAR, a path: trainstack cannot read it


def restated_problems(cmd: Command, batch: Batch) -> list[Problem]:
    """Options of ``cmd`` that restate a profile field with another value than the plan's."""
    out: list[Problem] = []
    for site in sites(cmd):
        for field, rule in _doc()["kinds"][site.kind].get("restated", {}).items():
            options, pattern = (rule, None) if isinstance(rule, list) else (rule["options"], rule.get("pattern"))
            example = "{}" if isinstance(rule, list) else rule.get("example", "{}")
            want = batch.wants(field)
            for name, text in site.given:
                have = _value(text, pattern) if name in options else None
                if have is None or want is None or have == want:
                    continue
                words, profile_field = FIELDS[field]
                keeps = field == "gradient_accumulation_steps" and batch.follows_nodes
                if keeps:
                    fix = (f"give training.global_batch_size only and drop {name} (trainstack passes the accumulation "
                           f"that keeps it), or give {name} {want}")
                else:
                    fix = (f"make them agree: set {profile_field}: {have}, or give {name} {example.format(want)} "
                           "(or drop it)")
                out.append(problem(f"{name} {text} says {words} {have}, and {profile_field} is {want} (the plan is "
                                   "sized for it)", fix, name))
    return out


def accumulation_problems(cmd: Command, batch: Batch) -> list[Problem]:
    """A program with no accumulation channel on a plan whose node count sets the global batch."""
    if not batch.follows_nodes:
        return []
    site = sites(cmd)[-1]
    if _doc()["kinds"][site.kind]["accumulation"]["channel"] != "none":
        return []
    return [problem(f"training.global_batch_size {batch.global_batch_size} needs gradient accumulation "
                    f"{batch.accumulation} on the plan's {batch.data_parallel} data-parallel rank(s), and this "
                    "program takes it neither as an option nor from its environment",
                    "launch a program that takes it (docs/launchers.md), or state "
                    "training.gradient_accumulation_steps instead of global_batch_size")]


def accumulation_words(cmd: Command, batch: Optional[Batch]) -> tuple[list[str], list[tuple[str, str]]]:
    """(words appended to the command line, trainer environment) that carry the plan's accumulation."""
    if batch is None or not batch.follows_nodes:
        return [], []
    env = [(env_name(), str(batch.accumulation))]
    site = next((s for s in sites(cmd) if s.kind != "accelerate"), None)
    acc = _doc()["kinds"][site.kind]["accumulation"] if site else {"channel": "env"}
    if acc["channel"] not in ("flag", "key") or any(name == acc["option"] for name, _ in site.given):
        return [], env  # the command gives it (and agrees: restated_problems), or the script reads the env
    value = str(batch.accumulation if acc["value"] == "accumulation" else batch.achieved)
    return ([acc["option"], value] if acc["channel"] == "flag" else [f"{acc['option']}={value}"]), env


def notes(cmd: Command, batch: Optional[Batch]) -> list[str]:
    """What trainstack cannot see about the accumulation (a value set inside the code)."""
    if batch is None or not batch.follows_nodes:
        return []
    words, _ = accumulation_words(cmd, batch)
    where = f"as {' '.join(words)} and " if words else ""
    return [f"training.global_batch_size {batch.global_batch_size}: gradient accumulation {batch.accumulation} "
            f"reaches the trainer {where}as {env_name()}={batch.accumulation}; a value set inside the code or its "
            "config file (Accelerator(gradient_accumulation_steps=...), a DeepSpeed JSON) trainstack cannot see: "
            "it must read that variable (docs/launchers.md)"]
