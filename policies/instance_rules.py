"""How ECS instances, launch templates and scaling configurations are configured: no spot instances
in deployment sets, metadata tokens (IMDSv2) required (trainstack.rules.checks.instance)."""

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


def no_spot_in_deployment_set(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    return B.resource_policy(B.NO_SPOT_IN_DEPLOYMENT_SET, level, lambda args: V.resource_view(args, "instances"))


def metadata_tokens_required(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    return B.resource_policy(B.METADATA_TOKENS_REQUIRED, level, lambda args: V.resource_view(args, "instances"))
