"""The topology options a launcher takes as flags: the plan decides them, so a user's value
is accepted only when it says what the plan says (and then trainstack writes its own), and
refused with the reason when it contradicts the plan or cannot work without SSH."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import Problem
from . import parallel
from .base import Command, Context, problem
from .options import Option, Scan, facts, scan

#: role -> what the plan has, in words (for messages)
ROLES = ("nnodes", "nproc", "world", "node_rank", "master_addr", "master_port", "endpoint", "rdzv_backend",
         "standalone")


@dataclass(frozen=True)
class Forbidden:
    """An option that cannot work on trainstack's nodes whatever its value."""

    why: str
    fix: str
    unless: Optional[Callable[[Option], bool]] = None  # accepted when this holds


def _int(text: Optional[str]) -> Optional[int]:
    try:
        return int(str(text).strip())
    except (TypeError, ValueError):
        return None


def _agrees(role: str, opt: Option, ctx: Context) -> tuple[bool, str]:
    """(the user's value says what the plan says, what the plan says)"""
    t = ctx.topology
    assert t is not None
    v = opt.value
    if role == "nnodes":
        lo, _, hi = str(v).partition(":")
        ok = _int(lo) == t.nnodes and (not hi or _int(hi) == t.nnodes)
        return ok, f"the plan runs {t.nnodes} node(s)"
    if role == "nproc":
        ok = _int(v) == t.nproc_per_node or (str(v) in ("gpu", "auto") and t.platform in ("ecs", "dlc"))
        return ok, f"the plan runs {t.nproc_per_node} process(es) per node, one per GPU"
    if role == "world":
        return _int(v) == t.world_size, (f"the plan runs {t.world_size} process(es) in all "
                                         f"({t.nnodes} node(s) x {t.nproc_per_node})")
    if t.elastic is not None and role in ("node_rank", "master_addr", "master_port", "rdzv_backend", "endpoint",
                                          "standalone"):
        return _agrees_elastic(role, opt, t)
    if role == "node_rank":
        return t.nnodes == 1 and _int(v) == 0, f"each of the plan's {t.nnodes} node(s) gets its own rank"
    if role == "master_addr":
        if t.platform == "dlc":
            return False, "on PAI-DLC node 0's address comes from the pod's MASTER_ADDR"
        return str(v) == t.master_addr, f"the rendezvous runs on node 0 ({t.master_addr})"
    if role == "master_port":
        if t.platform == "dlc":
            return False, "on PAI-DLC the port comes from the pod's MASTER_PORT"
        return _int(v) == t.master_port, f"the rendezvous listens on port {t.master_port} of node 0"
    if role == "endpoint":
        if t.platform == "dlc":
            return False, "on PAI-DLC the rendezvous is the pod's MASTER_ADDR:MASTER_PORT"
        return str(v) == f"{t.master_addr}:{t.master_port}", f"the rendezvous is {t.master_addr}:{t.master_port}"
    if role == "rdzv_backend":
        return str(v) == "static", "trainstack uses the static rendezvous on node 0 (fixed ranks)"
    if role == "standalone":
        return t.nnodes == 1, f"--standalone is a single-node rendezvous; the plan runs {t.nnodes} nodes"
    raise AssertionError(role)


def _agrees_elastic(role: str, opt: Option, t) -> tuple[bool, str]:
    """A self-healing plan's torchrun elastic: ranks from the c10d rendezvous on node 0."""
    endpoint = t.rendezvous_endpoint
    if role == "rdzv_backend":
        return str(opt.value) == "c10d", f"a self-healing plan uses torchrun's c10d rendezvous on node 0 ({endpoint})"
    if role == "endpoint":
        return str(opt.value) == endpoint, f"the rendezvous is {endpoint} (node 0)"
    if role == "node_rank":
        return False, "on a self-healing plan node ranks come from the rendezvous (a replacement takes any rank)"
    return False, f"a self-healing plan rendezvous through c10d at {endpoint}, not a master address and port"


def split_options(found: Scan, roles: dict[str, str], forbidden: dict[str, Forbidden], ctx: Context,
                  tool: str) -> tuple[list[Problem], list[Option]]:
    """(problems, the user's options to keep). Managed options that agree are dropped: the
    launcher writes the plan's value instead."""
    problems: list[Problem] = []
    kept: list[Option] = []
    for opt in found.options:
        if opt.canonical in forbidden:
            rule = forbidden[opt.canonical]
            if rule.unless is None or not rule.unless(opt):
                problems.append(problem(f"{tool} {opt.canonical} {rule.why}", rule.fix, opt.given))  # given: repr
                continue
            kept.append(opt)
            continue
        role = roles.get(opt.canonical)
        if role is None:
            kept.append(opt)
            continue
        if not ctx.known:
            continue  # checked again once the plan is known
        ok, plan_says = _agrees(role, opt, ctx)
        if not ok:
            problems.append(problem(f"{tool} {opt.canonical} contradicts the plan: {plan_says}",
                                    f"remove {opt.canonical}; trainstack passes {tool} the plan's value itself",
                                    opt.given))
    for word in found.unknown:
        problems.append(problem(
            f"{word} is not an option of {tool} (checked against its documented options), so trainstack cannot "
            "tell whether the next word is its value or the script",
            f"write it as {word}=VALUE if it takes one, or move it after the script if it is the script's", word))
    if found.missing_value:
        problems.append(problem(f"{found.missing_value} needs a value and none follows", "give it a value",
                                found.missing_value))
    return problems, kept


def option_words(options: list[Option]) -> list[str]:
    return [w for o in options for w in o.words]


def check_script_launcher(cmd: Command, ctx: Context, tool: str, label: str, roles: dict[str, str],
                          forbidden: dict[str, Forbidden]) -> list[Problem]:
    """A launcher that runs a training script (accelerate launch, deepspeed): its options read by
    the tool's own option facts, a script named, and the parallel degrees it cannot carry refused."""
    found = scan(cmd.args, facts(tool))
    problems, _ = split_options(found, roles, forbidden, ctx, label)
    if not found.program and not found.missing_value:
        problems.append(problem(f"the command runs {label} without a script", "name the training script"))
    if ctx.known:
        problems += parallel.refused(cmd, ctx.topology.degrees)
    return problems
