"""The tools' own README forms of the topology, leading ``NAME=value`` words of ``job.command``:
``FORCE_TORCHRUN=1 NNODES=2 ... llamafactory-cli train ...`` (LLaMA-Factory examples/README.md),
``NPROC_PER_NODE=8 swift sft ...`` (ms-swift). trainstack writes these names itself from the plan, so a
word is accepted when it says what trainstack would write on every node (then trainstack's own value
is the one set, which is the same) and refused, naming the plan's value, when it does not.

LLaMA-Factory reads FORCE_TORCHRUN as enabled for ``true``, ``y`` or ``1`` in any case
(src/llamafactory/extras/misc.py ``is_env_enabled``, commit ff6d4d12eeb035d6ce06805a5733dd7b29f2ac30);
trainstack sets 1 for it, and no other tool reads the name.
"""

from __future__ import annotations

from typing import Optional

from ..errors import Problem
from .base import Command, problem
from .topology import Topology

#: the names a README form may carry (launchers/base.py TOPOLOGY_ENV, and LLaMA-Factory's switch)
FORMS = ("NNODES", "NODE_RANK", "NPROC_PER_NODE", "MASTER_ADDR", "MASTER_PORT", "FORCE_TORCHRUN")
_ENABLED = ("true", "y", "1")


def _int(text: str) -> Optional[int]:
    try:
        return int(text.strip())
    except ValueError:
        return None


def plan_value(name: str, tool: str, t: Topology) -> tuple[Optional[str], str]:
    """(what trainstack writes for ``name`` on every node, or None when it differs by node or is
    known only at run time; the plan's value in words)."""
    if name == "FORCE_TORCHRUN":
        return ("1" if tool == "llamafactory" else None), ("LLaMA-Factory runs under torchrun (FORCE_TORCHRUN=1)"
                                                           if tool == "llamafactory" else f"{tool} does not read it")
    if name == "NNODES":
        return str(t.nnodes), f"the plan runs {t.nnodes} node(s)"
    if name == "NPROC_PER_NODE":
        return str(t.nproc_per_node), f"the plan runs {t.nproc_per_node} process(es) per node"
    if name == "NODE_RANK":
        return ("0" if t.nnodes == 1 else None), f"each of the plan's {t.nnodes} node(s) gets its own rank"
    if t.platform == "dlc" or t.elastic is not None:
        return None, f"{name} comes from the pod or the rendezvous at run time"
    if name == "MASTER_ADDR":
        return t.master_addr, f"the rendezvous runs on node 0 ({t.master_addr})"
    return str(t.master_port), f"the rendezvous listens on port {t.master_port} of node 0"


def agrees(name: str, value: str, tool: str, t: Topology) -> bool:
    want, _ = plan_value(name, tool, t)
    if want is None:
        return False
    if name == "FORCE_TORCHRUN":
        return value.strip().lower() in _ENABLED
    if name == "MASTER_ADDR":
        return value.strip() == want
    return _int(value) is not None and _int(value) == _int(want)


def problems(cmd: Command, t: Optional[Topology]) -> list[Problem]:
    """README forms that contradict the plan (none before the plan is known)."""
    if t is None:
        return []
    out = []
    for name, value in cmd.env:
        if name in FORMS and not agrees(name, value, cmd.tool, t):
            _, says = plan_value(name, cmd.tool, t)
            out.append(problem(f"the command sets {name}={value}, and {says}; trainstack sets {name} from the plan "
                               "for every launcher", f"remove {name}=... (or give the plan's value)", name))
    return out


def kept(cmd: Command, t: Topology) -> tuple[tuple[str, str], ...]:
    """The command's leading words without the agreeing README forms (trainstack writes those itself)."""
    return tuple((n, v) for n, v in cmd.env if not (n in FORMS and agrees(n, v, cmd.tool, t)))
