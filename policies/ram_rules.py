"""RAM policies and attachments: no OSS access on a wildcard bucket, no all-bucket system policies
(trainstack.rules.checks.ram)."""

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

from trainstack.rules.checks.ram import ALL_BUCKET_SYSTEM_POLICIES, wildcard_oss_resources  # noqa: F401

RAM_POLICY = V.RAM_POLICY
RAM_ATTACHMENTS = V.RAM_ATTACHMENTS


def no_wildcard_oss_access(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    return B.resource_policy(B.NO_WILDCARD_OSS_ACCESS, level,
                             lambda args: V.resource_view(args, "ram_policies", "ram_attachments"))
