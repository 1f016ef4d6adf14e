"""Tags every taggable resource must carry (advisory; the keys come from the policy config;
trainstack.rules.checks.tags)."""

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

from trainstack.rules.policy_book import DEFAULT_REQUIRED_TAGS as _DEFAULT

DEFAULT_REQUIRED_TAGS = list(_DEFAULT)


def required_tags(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    return B.resource_policy(B.REQUIRED_TAGS, level, lambda args: V.resource_view(args, "tagged"))
