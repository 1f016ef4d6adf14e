"""How ECS instances, launch templates and scaling configurations are configured: no spot instances
in deployment sets, metadata tokens (IMDSv2) required.
"""

from __future__ import annotations

from typing import Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from ._base import METADATA_TOKENS_REQUIRED, NO_SPOT_IN_DEPLOYMENT_SET, level_or_default
    from . import _nodes as N
    from . import _props as P
else:  # run by Pulumi from inside policies/
    from _base import METADATA_TOKENS_REQUIRED, NO_SPOT_IN_DEPLOYMENT_SET, level_or_default  # type: ignore[no-redef]
    import _nodes as N  # type: ignore[no-redef]
    import _props as P  # type: ignore[no-redef]

from pulumi_policy import (
    EnforcementLevel,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
)


# ---- 8. no-spot-in-deployment-set -------------------------------------------------------------
def no_spot_in_deployment_set(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type not in (N.INSTANCE, N.INSTANCE_SET, N.LAUNCH_TEMPLATE):
            return
        p = P.plain(args.props)
        if "deploymentSetId" not in p:  # presence only: the id is usually unknown at preview
            return
        ds = p["deploymentSetId"]
        if ds is None or (isinstance(ds, str) and not ds):  # "" removes the instance from its set
            return
        strategy = N.spot_strategy(p)
        if strategy not in N.SPOT_STRATEGIES:
            return
        where = f"deployment set {ds}" if isinstance(ds, str) else "a deployment set"
        report(f"{args.name}: spot instance ({strategy}) in {where}; Alibaba Cloud rejects spot instances "
               "in deployment sets at apply time: drop deploymentSetId for spot nodes or use NoSpot")

    return ResourceValidationPolicy(
        name=NO_SPOT_IN_DEPLOYMENT_SET,
        description="Checks whether spot instances are placed in a deployment set, which Alibaba Cloud "
                    "rejects at apply time.",
        validate=validate,
        enforcement_level=level_or_default(NO_SPOT_IN_DEPLOYMENT_SET, level),
    )


# ---- 12. metadata-tokens-required -------------------------------------------------------------
def metadata_tokens_required(level: Optional[EnforcementLevel] = None) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type not in (N.INSTANCE, N.LAUNCH_TEMPLATE, N.SCALING_CONFIGURATION, N.INSTANCE_SET):
            return
        p = P.plain(args.props)
        if (P.as_str(p.get("httpEndpoint")) or "enabled").lower() == "disabled":
            return  # no metadata service at all: nothing to steal a role's credentials from
        if args.resource_type == N.SCALING_CONFIGURATION:
            report(f"{args.name}: an ESS scaling configuration cannot require metadata tokens (pulumi-alicloud "
                   "4.0 / terraform-provider-alicloud expose only http_endpoint), so its nodes also answer "
                   "token-less metadata requests, and a process on the node (or an SSRF) can read the RAM role's "
                   "credentials without a token; trainstack's bootstrap uses tokens anyway. Accept it for "
                   "self-healing spot pools, or set this policy mandatory to refuse them")
            return
        if args.resource_type == N.INSTANCE_SET:
            report(f"{args.name}: EcsInstanceSet cannot require metadata tokens; declare ecs.Instance nodes with "
                   "http_tokens=\"required\"")
            return
        if (P.as_str(p.get("httpTokens")) or "optional").lower() != "required":
            report(f"{args.name}: metadata tokens are not required (httpTokens is not \"required\"): set "
                   "http_tokens=\"required\" so only token-holding (IMDSv2) requests reach the RAM role's "
                   "credentials")

    return ResourceValidationPolicy(
        name=METADATA_TOKENS_REQUIRED,
        description="Checks whether ECS instances and launch templates require metadata tokens (IMDSv2), "
                    "and reports ESS scaling configurations, which cannot.",
        validate=validate,
        enforcement_level=level_or_default(METADATA_TOKENS_REQUIRED, level),
    )
