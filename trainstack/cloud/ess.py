"""Auto Scaling (ESS) OpenAPI calls for the pool's scaling configuration (components/ess_pool.py).

Alibaba's official SDK ``alibabacloud-ess20220222`` (1.13.3): request models built from the plain inputs
of trainstack.layout.pool_configuration, the same steps terraform-provider-alicloud's
alicloud_ess_scaling_configuration takes (ace5bcf8): CreateScalingConfiguration, then ``active``
(ModifyScalingGroup ActiveScalingConfigurationId, service_alicloud_ess.go:403-416) and ``enable``
(EnableScalingGroup with that configuration while the group is Inactive,
resource_alicloud_ess_scaling_configuration.go:1523-1570); an update is ModifyScalingConfiguration;
a delete is DeleteScalingConfiguration, or, for the group's last configuration with ``force_delete``,
DeleteScalingGroup ForceDelete (:1936-1990). Every call goes through the shared retry policy; a failure
is the shared exit-5 error (trainstack.cloud.errors). The client is built per call (nothing pickled).
"""

from __future__ import annotations

import json
from typing import Any, Callable, Mapping, Optional

from .credentials import sdk_config
from .errors import ApiErrorInfo, cloud_error, is_not_found
from .retry import GaveUp, RetryPolicy, with_retries

#: the pool's calls at deploy time: jittered like the DLC calls (several stacks may deploy at once)
ESS_CALLS = RetryPolicy(attempts=6, base_s=1.0, cap_s=30.0, jitter=0.5)


def default_client(region: str) -> Any:
    """The real ESS client of ``region`` (default credentials chain; the SDK's endpoint map)."""
    from alibabacloud_ess20220222.client import Client  # the SDK loads only when the pool provider runs

    return Client(sdk_config(region, connect_timeout=10_000, read_timeout=30_000))


def _call(operation: str, region: str, fn: Callable[[], Any], *, idempotent: bool = True,
          sleep: Optional[Callable[[float], None]] = None, missing_ok: bool = False) -> Any:
    try:
        return with_retries(fn, policy=ESS_CALLS, idempotent=idempotent, sleep=sleep,
                            stop=lambda info: missing_ok and is_not_found(info))
    except GaveUp as failed:
        if missing_ok and is_not_found(failed.info):
            return None
        raise cloud_error("ess", operation, region, failed.cause, attempts=failed.attempts) from None


def _interfaces(models: Any, cls: str, rows: Any) -> Optional[list]:
    if not rows:
        return None
    make = getattr(models, cls)
    return [make(instance_type=r.get("instanceType"), network_interface_traffic_mode=r.get("networkInterfaceTrafficMode"),
                 security_group_ids=list(r.get("securityGroupIds") or [])) for r in rows]


def _common(models: Any, prefix: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Arguments CreateScalingConfiguration and ModifyScalingConfiguration share (SDK field names)."""
    disks = [getattr(models, f"{prefix}DataDisks")(
        category=d.get("category"), performance_level=d.get("performanceLevel"), size=d.get("size"),
        encrypted=str(bool(d.get("encrypted"))).lower(), delete_with_instance=d.get("deleteWithInstance"),
        disk_name=d.get("name")) for d in inputs.get("dataDisks") or []]
    limits = [getattr(models, f"{prefix}SpotPriceLimits")(instance_type=r["instanceType"], price_limit=r["priceLimit"])
              for r in inputs.get("spotPriceLimits") or []]
    system = getattr(models, f"{prefix}SystemDisk")(
        category=inputs.get("systemDiskCategory"), performance_level=inputs.get("systemDiskPerformanceLevel"),
        size=inputs.get("systemDiskSize"), encrypted=bool(inputs.get("systemDiskEncrypted")),
        disk_name=inputs.get("systemDiskName"))
    return dict(
        scaling_configuration_name=inputs.get("scalingConfigurationName"), instance_name=inputs.get("instanceName"),
        host_name=inputs.get("hostName"), instance_description=inputs.get("instanceDescription"),
        image_id=inputs.get("imageId"), spot_strategy=inputs.get("spotStrategy"), spot_price_limits=limits or None,
        spot_duration=inputs.get("spotDuration"), internet_max_bandwidth_out=inputs.get("internetMaxBandwidthOut"),
        http_endpoint=inputs.get("httpEndpoint"), http_tokens=inputs.get("httpTokens"), system_disk=system,
        data_disks=disks or None, ram_role_name=inputs.get("roleName"), user_data=inputs.get("userData"),
        key_pair_name=inputs.get("keyName"), tags=json.dumps(inputs.get("tags") or {}, sort_keys=True),
        security_group_ids=list(inputs["securityGroupIds"]) if inputs.get("securityGroupIds") else None,
        network_interfaces=_interfaces(models, f"{prefix}NetworkInterfaces", inputs.get("networkInterfaces")))


def create_request(inputs: Mapping[str, Any]) -> Any:
    from alibabacloud_ess20220222 import models  # the SDK loads only when the pool provider runs

    return models.CreateScalingConfigurationRequest(
        scaling_group_id=inputs["scalingGroupId"], instance_type=inputs.get("instanceType"),
        **_common(models, "CreateScalingConfigurationRequest", inputs))


def modify_request(configuration_id: str, inputs: Mapping[str, Any]) -> Any:
    from alibabacloud_ess20220222 import models  # the SDK loads only when the pool provider runs

    return models.ModifyScalingConfigurationRequest(
        scaling_configuration_id=configuration_id, instance_types=[inputs["instanceType"]],
        **_common(models, "ModifyScalingConfigurationRequest", inputs))


def describe(client: Any, region: str, group_id: str, configuration_id: Optional[str] = None) -> list[Any]:
    """The group's configurations (DescribeScalingConfigurations), or just ``configuration_id``'s."""
    from alibabacloud_ess20220222 import models  # the SDK loads only when the pool provider runs

    req = models.DescribeScalingConfigurationsRequest(region_id=region, scaling_group_id=group_id, page_size=50)
    if configuration_id:
        req.scaling_configuration_ids = [configuration_id]
    body = _call("DescribeScalingConfigurations", region, lambda: client.describe_scaling_configurations(req)).body
    return list(getattr(body, "scaling_configurations", None) or [])


def group_state(client: Any, region: str, group_id: str) -> Optional[str]:
    """The group's LifecycleState (Active | Inactive | ...), None when it is gone."""
    from alibabacloud_ess20220222 import models  # the SDK loads only when the pool provider runs

    req = models.DescribeScalingGroupsRequest(region_id=region, scaling_group_ids=[group_id])
    body = _call("DescribeScalingGroups", region, lambda: client.describe_scaling_groups(req)).body
    groups = list(getattr(body, "scaling_groups", None) or [])
    return getattr(groups[0], "lifecycle_state", None) if groups else None


def create(client: Any, region: str, inputs: Mapping[str, Any]) -> str:
    """CreateScalingConfiguration, then ``active`` and ``enable`` as the provider resource does; the id."""
    from alibabacloud_ess20220222 import models  # the SDK loads only when the pool provider runs

    # not idempotent without a client token: retried only when the API surely did not run it
    body = _call("CreateScalingConfiguration", region,
                 lambda: client.create_scaling_configuration(create_request(inputs)), idempotent=False).body
    configuration_id = str(body.scaling_configuration_id)
    group = str(inputs["scalingGroupId"])
    if inputs.get("active"):
        req = models.ModifyScalingGroupRequest(scaling_group_id=group, active_scaling_configuration_id=configuration_id)
        _call("ModifyScalingGroup", region, lambda: client.modify_scaling_group(req))
    if inputs.get("enable") and group_state(client, region, group) == "Inactive":
        req2 = models.EnableScalingGroupRequest(region_id=region, scaling_group_id=group,
                                                active_scaling_configuration_id=configuration_id)
        _call("EnableScalingGroup", region, lambda: client.enable_scaling_group(req2))
    return configuration_id


def modify(client: Any, region: str, configuration_id: str, inputs: Mapping[str, Any]) -> None:
    """ModifyScalingConfiguration (only nodes launched later get the change); ``active`` again if asked."""
    from alibabacloud_ess20220222 import models  # the SDK loads only when the pool provider runs

    _call("ModifyScalingConfiguration", region,
          lambda: client.modify_scaling_configuration(modify_request(configuration_id, inputs)))
    if inputs.get("active"):
        req = models.ModifyScalingGroupRequest(scaling_group_id=str(inputs["scalingGroupId"]),
                                               active_scaling_configuration_id=configuration_id)
        _call("ModifyScalingGroup", region, lambda: client.modify_scaling_group(req))


def delete(client: Any, region: str, configuration_id: str, group_id: str, force_delete: bool) -> None:
    """Delete the configuration; the group's last one only with ``force_delete`` (its group goes with it)."""
    from alibabacloud_ess20220222 import models  # the SDK loads only when the pool provider runs

    configs = describe(client, region, group_id)
    if not any(getattr(c, "scaling_configuration_id", None) == configuration_id for c in configs):
        return  # gone already
    if len(configs) == 1:
        if not force_delete:
            raise cloud_error("ess", "DeleteScalingConfiguration", region, RuntimeError(
                f"{configuration_id} is the last configuration of scaling group {group_id}"))
        req = models.DeleteScalingGroupRequest(scaling_group_id=group_id, force_delete=True, region_id=region)
        _call("DeleteScalingGroup", region, lambda: client.delete_scaling_group(req), missing_ok=True)
        return
    req2 = models.DeleteScalingConfigurationRequest(scaling_configuration_id=configuration_id)
    _call("DeleteScalingConfiguration", region, lambda: client.delete_scaling_configuration(req2), missing_ok=True)


def read_state(client: Any, region: str, group_id: str, configuration_id: str) -> Optional[dict[str, Any]]:
    """What ``pulumi refresh`` keeps of the configuration: its lifecycle state and tokens setting (None: gone)."""
    found = [c for c in describe(client, region, group_id, configuration_id)
             if getattr(c, "scaling_configuration_id", None) == configuration_id]
    if not found:
        return None
    c = found[0]
    return {"lifecycleState": getattr(c, "lifecycle_state", None), "httpTokens": getattr(c, "http_tokens", None)}


__all__ = ["ApiErrorInfo", "create", "create_request", "default_client", "delete", "describe", "group_state",
           "modify", "modify_request", "read_state"]
