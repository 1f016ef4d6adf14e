"""Security group rules: SSH (port 22, or all ports) never open to the internet at large
(trainstack.rules.checks.network; the source rule is trainstack/cidrs.py, the profile's own)."""

from __future__ import annotations

from typing import Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from . import _base as B
    from . import _view as V
else:  # run by Pulumi from inside policies/
    import _base as B  # type: ignore[no-redef]
    import _view as V  # type: ignore[no-redef]

from pulumi_policy import EnforcementLevel, ResourceValidationPolicy


def no_public_ssh(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    return B.resource_policy(B.NO_PUBLIC_SSH, level, lambda args: V.resource_view(args, "ingress"))
