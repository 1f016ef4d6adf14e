"""Tags every taggable resource must carry (advisory; the keys come from the policy config)."""

from __future__ import annotations

from typing import Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from ._base import REQUIRED_TAGS, config_value, level_or_default
    from . import _nodes as N
    from . import _props as P
else:  # run by Pulumi from inside policies/
    from _base import REQUIRED_TAGS, config_value, level_or_default  # type: ignore[no-redef]
    import _nodes as N  # type: ignore[no-redef]
    import _props as P  # type: ignore[no-redef]

from pulumi_policy import (
    EnforcementLevel,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)


DEFAULT_REQUIRED_TAGS = [P.NAME_TAG]


# ---- 10. required-tags (advisory) --------------------------------------------------------------
def required_tags(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        p = P.plain(args.props)
        if N.is_dlc_job(p) or (args.resource_type not in N.TAGGABLE_TYPES and "tags" not in p):
            return
        have = P.tags(p)
        missing = [k for k in config_value(args, "required_tags", DEFAULT_REQUIRED_TAGS)
                   if k not in have or (isinstance(have[k], str) and not have[k].strip())]
        if missing:
            many = len(missing) > 1
            report(f"{args.name}: missing tag{'s' if many else ''} {', '.join(missing)}: add "
                   f"{'them' if many else 'it'} to the resource's tags (profile tags apply to every resource)")

    return ResourceValidationPolicy(
        name=REQUIRED_TAGS,
        description="Checks whether taggable resources carry the required tags.",
        validate=validate,
        enforcement_level=level_or_default(REQUIRED_TAGS, level),
        config_schema=PolicyConfigSchema(properties={
            "required_tags": {"type": "array", "items": {"type": "string"},
                              "default": list(DEFAULT_REQUIRED_TAGS),
                              "description": "Tag keys every taggable resource must have"},
        }),
    )
