"""The policy config and verdicts of ``validate``, ``resolve``, ``plan`` and ``diff``: one flag, one
loader (trainstack.rules.policy_config), one way to print a verdict and one exit code (4) for a
mandatory one. ``--policy-config FILE`` replaces a stack's ``trainstack:policyConfig``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from ..errors import EXIT_POLICY
from ..rules.policy_config import load_policy_config, policy_allowances

HELP = ("policy levels and settings, JSON as for `pulumi preview --policy-pack-config` "
        "(replaces the stack's trainstack:policyConfig)")


def add_argument(parser) -> None:
    parser.add_argument("--policy-config", metavar="FILE", help=HELP)


def policy_config(args, stack_setting: Optional[Path] = None) -> Optional[dict[str, Any]]:
    """The config the command runs under: the flag's file, else the stack's, else none (exit 2 when bad)."""
    return load_policy_config(getattr(args, "policy_config", None) or stack_setting)


def allowances(config: Optional[dict[str, Any]]):
    """The resolver's exceptions under ``config`` (the file's PCIe exception, labelled with the file)."""
    return policy_allowances(config, getattr(config, "path", None))


def verdict_line(v) -> str:
    resource = f" [{v.resource}]" if v.resource else ""
    return f"policy {v.policy} ({v.level}){resource}: {v.message}"


def report(verdicts: Sequence, what: str, stream=None) -> int:
    """Each verdict on stderr (``stream``), then exit 4 when one is mandatory."""
    stream = stream or sys.stderr
    for v in verdicts:
        print(verdict_line(v), file=stream)
    mandatory = sum(1 for v in verdicts if v.blocking)
    if mandatory:
        print(f"trainstack: {what}: {mandatory} mandatory policy violation(s); `pulumi up` would be refused",
              file=stream)
        return EXIT_POLICY
    return 0
