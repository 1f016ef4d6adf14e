"""How instances, launch templates and scaling configurations are set up: no spot instances in
deployment sets, metadata tokens (IMDSv2) required."""

from __future__ import annotations

from typing import Iterator, Sequence

from ...catalog import Catalog
from ..stack_view import InstanceSettings, known
from . import Finding
from .values import as_str

INSTANCE = "alicloud:ecs/instance:Instance"
INSTANCE_SET = "alicloud:ecs/ecsInstanceSet:EcsInstanceSet"
LAUNCH_TEMPLATE = "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate"
SCALING_CONFIGURATION = "alicloud:ess/scalingConfiguration:ScalingConfiguration"
#: trainstack's own scaling configuration (``kind: ess-scaling-configuration``, components/ess_pool.py): the
#: views give a dynamic resource instance settings only for that kind, and it sets ``httpTokens`` itself
ESS_CONFIGURATION = "pulumi-python:dynamic:Resource"
SPOT_STRATEGIES = ("SpotWithPriceLimit", "SpotAsPriceGo")


def no_spot_in_deployment_set(items: Sequence[InstanceSettings], settings: dict, cat: Catalog) -> Iterator[Finding]:
    for i in items:
        if i.resource_type not in (INSTANCE, INSTANCE_SET, LAUNCH_TEMPLATE) or not i.has_deployment_set:
            continue  # presence only: the id is usually unknown at preview
        ds = i.deployment_set
        if ds is None or (isinstance(ds, str) and not ds):  # "" removes the instance from its set
            continue
        strategy = as_str(i.spot_strategy) or "NoSpot"
        if strategy not in SPOT_STRATEGIES:
            continue
        where = f"deployment set {ds}" if isinstance(ds, str) else "a deployment set"
        yield Finding(f"{i.resource}: spot instance ({strategy}) in {where}; Alibaba Cloud rejects spot instances "
                      "in deployment sets at apply time: drop deploymentSetId for spot nodes or use NoSpot", i.resource)


def metadata_tokens_required(items: Sequence[InstanceSettings], settings: dict, cat: Catalog) -> Iterator[Finding]:
    for i in items:
        if i.resource_type not in (INSTANCE, LAUNCH_TEMPLATE, SCALING_CONFIGURATION, INSTANCE_SET, ESS_CONFIGURATION):
            continue
        if (as_str(i.http_endpoint) or "enabled").lower() == "disabled":
            continue  # no metadata service at all: nothing to steal a role's credentials from
        if i.resource_type == SCALING_CONFIGURATION:
            yield Finding(f"{i.resource}: pulumi-alicloud 4.0's ess.ScalingConfiguration cannot require metadata "
                          "tokens (it exposes only http_endpoint), so its nodes answer token-less metadata requests "
                          "and a process on the node (or an SSRF) can read the RAM role's credentials without a "
                          "token: declare the configuration through the ESS API with HttpTokens=required (trainstack's "
                          "kind: ess-scaling-configuration, components/ess_pool.py)", i.resource)
        elif i.resource_type == INSTANCE_SET:
            yield Finding(f"{i.resource}: EcsInstanceSet cannot require metadata tokens; declare ecs.Instance nodes "
                          "with http_tokens=\"required\"", i.resource)
        elif (as_str(known(i.http_tokens)) or "optional").lower() != "required":
            yield Finding(f"{i.resource}: metadata tokens are not required (httpTokens is not \"required\"): set "
                          "http_tokens=\"required\" so only token-holding (IMDSv2) requests reach the RAM role's "
                          "credentials", i.resource)
