"""Build policy arguments the way the Pulumi engine does, and collect violations by message.

Props travel like the engine's: a protobuf ``Struct`` (so every number is a float), then
``deserialize_properties`` and ``unknown_checking_proxy`` (reading an unknown raises).
"""

from __future__ import annotations

from typing import Any, Optional

from google.protobuf import json_format, struct_pb2
from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UNKNOWN_STRING_VALUE, unknown_checking_proxy

from policies.rules import POLICIES_BY_NAME

UNKNOWN = UNKNOWN_STRING_VALUE
UNKNOWN_NUMBER = UNKNOWN_NUMBER_VALUE

INSTANCE = "alicloud:ecs/instance:Instance"
SCALING_CONFIGURATION = "alicloud:ess/scalingConfiguration:ScalingConfiguration"
SCALING_GROUP = "alicloud:ess/scalingGroup:ScalingGroup"
INSTANCE_SET = "alicloud:ecs/ecsInstanceSet:EcsInstanceSet"
LAUNCH_TEMPLATE = "alicloud:ecs/ecsLaunchTemplate:EcsLaunchTemplate"
ENI = "alicloud:ecs/ecsNetworkInterface:EcsNetworkInterface"
ENI_ATTACHMENT = "alicloud:ecs/ecsNetworkInterfaceAttachment:EcsNetworkInterfaceAttachment"
ECS_DISK = "alicloud:ecs/ecsDisk:EcsDisk"
DISK = "alicloud:ecs/disk:Disk"
SG_RULE = "alicloud:ecs/securityGroupRule:SecurityGroupRule"
SECURITY_GROUP = "alicloud:ecs/securityGroup:SecurityGroup"
NAS = "alicloud:nas/fileSystem:FileSystem"
OSS = "alicloud:oss/bucket:Bucket"
DYNAMIC = "pulumi-python:dynamic:Resource"
VPC = "alicloud:vpc/network:Network"


def wrap(inputs: dict) -> Any:
    struct = struct_pb2.Struct()
    struct.update(inputs)
    return unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(struct)))


def urn(type_: str, name: str) -> str:
    return f"urn:pulumi:dev::trainstack::{type_}::{name}"


def opts(protect: bool = False) -> PolicyResourceOptions:
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], None)


def provider(region: Optional[str]) -> Optional[PolicyProviderResource]:
    if region is None:
        return None
    return PolicyProviderResource("pulumi:providers:alicloud", wrap({"region": region}),
                                  urn("pulumi:providers:alicloud", "default"), "default")


def training_node(instance_type: str, zone: str = "cn-shenzhen-f", **extra: Any) -> dict:
    inputs = {"instanceType": instance_type, "instanceChargeType": "PostPaid", "spotStrategy": "NoSpot",
              "httpEndpoint": "enabled", "httpTokens": "required", "tags": {"trainstack:role": "training", "trainstack:zone": zone, "trainstack:name": "test",
                       "team": "nlp"}}
    inputs.update(extra)
    return inputs


def violations(policy: str, type_: str, inputs: dict, *, name: str = "res", config: Optional[dict] = None,
               protect: bool = False, region: Optional[str] = None) -> list[str]:
    """Messages ``policy`` reports for one resource."""
    found: list[str] = []
    args = ResourceValidationArgs(type_, wrap(inputs), urn(type_, name), name, opts(protect), provider(region),
                                  config)
    POLICIES_BY_NAME[policy].validate(args, lambda message, u=None: found.append(message))
    return found


def res(type_: str, name: str, inputs: dict, *, protect: bool = False, region: Optional[str] = None,
        depends: Optional[dict[str, list[PolicyResource]]] = None) -> PolicyResource:
    """A stack resource; ``depends`` = property dependencies ({"instanceId": [resource]})."""
    deps = [d for ds in (depends or {}).values() for d in ds]
    return PolicyResource(type_, wrap(inputs), urn(type_, name), name, opts(protect), provider(region), None,
                          deps, dict(depends or {}))


def stack_violations(policy: str, resources: list[PolicyResource], config: Optional[dict] = None) -> list[str]:
    found: list[str] = []
    POLICIES_BY_NAME[policy].validate(StackValidationArgs(resources, config),
                                      lambda message, u=None: found.append(message))
    return found


def one(messages: list[str], *parts: str) -> str:
    """The single message, asserted to contain every part."""
    assert len(messages) == 1, messages
    for part in parts:
        assert part in messages[0], (part, messages[0])
    return messages[0]
