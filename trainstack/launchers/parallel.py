"""The plan's parallel degrees on the command line of the programs that take them (data/parallel.yaml).

* torchtitan (``torchrun ... -m torchtitan.train``): ``--parallelism.tensor_parallel_degree`` and the
  other ``--parallelism.*`` overrides after the program;
* Megatron-LM (``torchrun ... pretrain_gpt.py``): ``--tensor-model-parallel-size`` and the others,
  ``--sequence-parallel`` with tensor parallelism (what trainstack sizes);
* ``accelerate launch``: its Megatron-LM plugin flags with ``--use_megatron_lm``, else its
  ParallelismConfig flags (tensor and context parallelism on FSDP2);
* ``tune run full_finetune_distributed``: ``tensor_parallel_dim=N``.

Any other program cannot be told a tensor, pipeline or context degree, so a plan with one is refused
for it (expert parallelism is passed where a program takes it and otherwise left to the training
code, as before). A degree the command gives itself is accepted when it says what the plan says
(trainstack then writes the plan's) and refused when it contradicts it.
"""

from __future__ import annotations

import functools
from typing import Optional

from ..errors import Problem
from .base import Command, problem
from .options import Option, Scan, data, facts, scan
from .topology import Degrees
from .torchrun_words import torchrun_words

#: degrees a command must carry when the plan's is > 1
CARRIED = ("tensor", "pipeline", "context")
FIELDS = {"tensor": "tensor_parallel", "pipeline": "pipeline_parallel", "context": "context_parallel",
          "expert": "expert_parallel"}
FIX = ("launch a program that takes the degrees: torchtitan (`torchrun -m torchtitan.train ...`), Megatron-LM "
       "(`torchrun pretrain_gpt.py ...`), `accelerate launch` (tensor/context; with --use_megatron_lm all), or "
       "`tune run full_finetune_distributed` (tensor); or set the degree to 1")


@functools.lru_cache(maxsize=1)
def _facts() -> dict:
    return data("parallel")


def _torchrun_program(cmd: Command) -> tuple[str, ...]:
    words, _ = torchrun_words(cmd)
    if words is None:
        return ()
    found = scan(words, facts("torchrun"))
    return found.program


def kind(cmd: Command) -> Optional[str]:
    """Which degree-taking program ``cmd`` runs: torchtitan, megatron, accelerate-megatron,
    accelerate, tune; None for any other."""
    doc = _facts()
    if cmd.tool in ("torchrun", "python"):
        program = _torchrun_program(cmd)
        if not program:
            return None
        first = program[0]
        if first in doc["torchtitan"]["modules"] or any(first.endswith(s) for s in doc["torchtitan"]["scripts"]):
            return "torchtitan"
        if first.rsplit("/", 1)[-1] in doc["megatron"]["scripts"]:
            return "megatron"
        return None
    if cmd.tool == "accelerate":
        found = scan(cmd.args, facts("accelerate"))
        if found.find("--use_deepspeed"):
            return None
        return "accelerate-megatron" if found.find("--use_megatron_lm") else "accelerate"
    if cmd.tool == "tune":
        program = _torchrun_program(cmd)
        return "tune" if program and program[0] in doc["tune"]["recipes"] else None
    return None


def _section(k: str) -> dict:
    doc = _facts()
    if k == "accelerate-megatron":
        return doc["accelerate"]["megatron_lm"]
    if k == "accelerate":
        return doc["accelerate"]["parallelism_config"]
    return doc[k]


def degrees_taken(cmd: Optional[Command]) -> frozenset[str]:
    """The degrees ``cmd``'s program takes from its command line."""
    k = kind(cmd) if cmd is not None else None
    return frozenset(_section(k)["degrees"]) if k else frozenset()


def refused(cmd: Command, degrees: Degrees) -> list[Problem]:
    """A degree > 1 the command's program cannot be given, and degrees it gives that contradict the plan."""
    taken = degrees_taken(cmd)
    out = []
    for d in CARRIED:
        v = degrees.value(d)
        if v > 1 and d not in taken:
            out.append(problem(f"the layout has {FIELDS[d]} {v}, and {_what(cmd)} takes no {d}-parallel degree "
                               "trainstack can pass", FIX))
    k = kind(cmd)
    if k == "torchtitan" and degrees.virtual > 1 and not degrees_layers(degrees):
        out.append(problem("torchtitan takes interleaving as layers per stage, which this plan does not state",
                           "set training.virtual_pipeline_stages: 1"))
    for flag, value, want in _given(cmd, degrees):
        if value is not None and value != str(want):
            out.append(problem(f"{flag} {value} contradicts the plan's layout ({flag} {want})",
                               f"remove {flag}; trainstack passes the plan's value itself", flag))
    return out


def degrees_layers(degrees: Degrees) -> Optional[int]:
    return degrees.layers_per_stage or None


def _what(cmd: Command) -> str:
    if cmd.tool in ("torchrun", "python"):
        program = _torchrun_program(cmd)
        return f"`{program[0]}`" if program else "the command"
    return f"`{' '.join(cmd.head)}`" + (" with --use_deepspeed" if cmd.tool == "accelerate" else "")


def plan_words(k: str, degrees: Degrees) -> list[tuple[str, Optional[str]]]:
    """(flag, value or None for a switch) the plan gives program kind ``k``."""
    f = _section(k)["flags"]
    d = degrees
    out: list[tuple[str, Optional[str]]] = []
    if k == "torchtitan":
        out += [(f["tensor"], str(d.tensor)), (f["pipeline"], str(d.pipeline)), (f["context"], str(d.context))]
        out.append((f["data_shard"], str(d.data)) if d.sharded else (f["data_replicate"], str(d.data)))
        if d.sharded:
            out.append((f["data_replicate"], "1"))
        else:
            out.append((f["data_shard"], "1"))
        if d.expert > 1:
            out.append((f["expert"], str(d.expert)))
        if d.pipeline > 1:
            doc = _facts()["torchtitan"]
            out.append((f["schedule"], doc["interleaved_schedule"] if d.virtual > 1 else doc["plain_schedule"]))
            if d.virtual > 1 and d.layers_per_stage:
                out.append(("--parallelism.pipeline_parallel_layers_per_stage", str(d.layers_per_stage)))
    elif k == "megatron":
        out += [(f["tensor"], str(d.tensor)), (f["pipeline"], str(d.pipeline)), (f["context"], str(d.context))]
        if d.expert > 1:
            out.append((f["expert"], str(d.expert)))
        if d.virtual > 1:
            out.append((f["virtual"], str(d.virtual)))
        if d.tensor > 1:
            out.append((f["sequence_parallel"], None))
    elif k == "accelerate-megatron":
        out += [(f["tensor"], str(d.tensor)), (f["pipeline"], str(d.pipeline))]
        if d.context > 1:
            out.append((f["context"], str(d.context)))
        if d.expert > 1:
            out.append((f["expert"], str(d.expert)))
        if d.pipeline > 1:
            out.append((f["micro_batches"], str(d.micro_batches)))
        if d.tensor > 1:
            out.append((f["sequence_parallel"], "true"))
    elif k == "accelerate":
        out += [(f["enable"], None), (f["tensor"], str(d.tensor)), (f["context"], str(d.context)),
                (f["data_shard"] if d.sharded else f["data_replicate"], str(d.data))]
    elif k == "tune":
        out.append((f["tensor"], str(d.tensor)))
    return out


def _given(cmd: Command, degrees: Degrees) -> list[tuple[str, Optional[str], str]]:
    """(flag, the command's value, the plan's) for every plan flag the command already gives."""
    k = kind(cmd)
    if k is None or degrees.trivial:
        return []
    want = {flag: value for flag, value in plan_words(k, degrees) if value is not None}
    if k in ("accelerate", "accelerate-megatron"):
        found = scan(cmd.args, facts("accelerate"))
        return [(o.canonical, o.value, want[o.canonical]) for o in found.options if o.canonical in want]
    program = _torchrun_program(cmd)
    return [(flag, value, want[flag]) for flag, value in _program_flags(program[1:], k) if flag in want]


def _program_flags(args: tuple[str, ...], k: str) -> list[tuple[str, Optional[str]]]:
    """``--flag value``, ``--flag=value`` (and ``key=value`` for tune) among a program's arguments."""
    out, i = [], 0
    while i < len(args):
        word = args[i]
        if k == "tune" and "=" in word and not word.startswith("-"):
            key, _, value = word.partition("=")
            out.append((key, value))
        elif word.startswith("--"):
            name, eq, value = word.partition("=")
            if eq:
                out.append((name, value))
            elif i + 1 < len(args) and not args[i + 1].startswith("--"):
                out.append((name, args[i + 1]))
                i += 1
            else:
                out.append((name, None))
        i += 1
    return out


def program_with_degrees(cmd: Command, program: tuple[str, ...], degrees: Degrees) -> tuple[str, ...]:
    """The program's words with the plan's degrees (torchtitan, Megatron-LM, tune): the command's own
    degree flags (which agree, or check refused them) replaced by the plan's."""
    k = kind(cmd)
    if k not in ("torchtitan", "megatron", "tune") or degrees.trivial:
        return program
    plan = plan_words(k, degrees)
    ours = {flag for flag, _ in plan}
    switches = {flag for flag, value in plan if value is None}
    kept: list[str] = []
    args = program[1:]
    i = 0
    while i < len(args):
        word = args[i]
        name = word.partition("=")[0]
        if name in ours:
            takes_value = k != "tune" and name not in switches and "=" not in word
            if takes_value and i + 1 < len(args) and not args[i + 1].startswith("--"):
                i += 1
            i += 1
            continue
        kept.append(word)
        i += 1
    extra: list[str] = []
    for flag, value in plan:
        if k == "tune":
            extra.append(f"{flag}={value}")
        else:
            extra += [flag] if value is None else [flag, value]
    return (program[0], *kept, *extra)


def accelerate_options(found: Scan, kept: list[Option], degrees: Degrees) -> tuple[list[Option], list[str]]:
    """(the user's options without the degree flags the plan writes, the plan's degree words)."""
    k = "accelerate-megatron" if found.find("--use_megatron_lm") else "accelerate"
    if found.find("--use_deepspeed") or degrees.trivial:
        return kept, []
    plan = plan_words(k, degrees)
    ours = {flag for flag, _ in plan}
    words: list[str] = []
    for flag, value in plan:
        words += [flag] if value is None else [flag, value]
    return [o for o in kept if o.canonical not in ours], words
