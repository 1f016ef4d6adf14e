"""Names a job may not set (issue 13 item 8): job.env, job.secrets and the ``NAME=value``
words of job.command reach the trainer's environment, so none may shadow what trainstack
itself relies on. The list is derived, not typed twice:

- every variable the node's ``node.env`` defines for this plan (CHECKPOINT_DIR, STOP_ON,
  REGION, OSS_CHECKPOINT_URI, ...), and the arrays job.env defines for the launch script;
- every variable the launch script assigns itself (read from ``templates/trainstack-launch.sh``:
  ETC, PIDFILE, PATH, ...) and the agent's ``TRAINSTACK_*`` knobs;
- the topology every launcher reads (:data:`trainstack.launchers.RESERVED_ENV`: NNODES,
  MASTER_ADDR, WORLD_SIZE, ..., and torchrun's ``PET_*`` option variables);
- the few shell and loader variables that change how any script runs (below).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

from trainstack.errors import Problem
from trainstack.launchers import reserved as launcher_reserved

TEMPLATES = Path(__file__).with_name("templates")
#: change how bash or the dynamic loader run every later command
SHELL_VARIABLES = frozenset({"BASH_ENV", "ENV", "IFS", "SHELLOPTS", "BASHOPTS", "PS4", "CDPATH", "GLOBIGNORE",
                             "LD_PRELOAD", "LD_AUDIT", "PATH"})
PREFIXES = ("TRAINSTACK_",)
#: NAME=value alone on its line (or an array), not a NAME=value prefix of one command
_ASSIGNED = re.compile(r"^\s*(?:export\s+)?([A-Z][A-Z0-9_]*)=(?:\(.*|\"[^\"]*\"|'[^']*'|[^\s'\"]*)\s*(?:[;#].*)?$",
                       re.M)
_EXPORTED = re.compile(r"\bexport\s+((?:[A-Z][A-Z0-9_]*=\S*\s*\\?\s*)+)")


@functools.lru_cache(maxsize=None)
def launch_script_names() -> frozenset[str]:
    """Upper-case variables the launch script assigns (its own state and paths)."""
    text = (TEMPLATES / "programs" / "trainstack-launch.sh").read_text(encoding="utf-8")
    names = set(_ASSIGNED.findall(text))
    for group in _EXPORTED.findall(text):
        names |= set(re.findall(r"([A-Z][A-Z0-9_]*)=", group))
    return frozenset(names)


def is_reserved(name: str, node_env: set[str]) -> bool:
    return (name in node_env or name in launch_script_names() or name in SHELL_VARIABLES
            or name.startswith(PREFIXES) or launcher_reserved(name))


def reserved_problems(names: dict[str, list[str]], node_env: set[str]) -> list[Problem]:
    """One problem per reserved name, by the field that set it."""
    out = []
    for field, given in names.items():
        for name in given:
            if is_reserved(name, node_env):
                out.append(Problem(
                    path=f"{field}.{name}" if field != "job.command" else field,
                    message=(f"{name} is set by trainstack itself on the node (node files, launch script, launcher "
                             "topology or shell); a job may not override it; fix: remove it, or use another name"),
                    given=name, has_given=True))
    return out
