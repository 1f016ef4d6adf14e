"""The ESS scaling configuration of a self-healing pool, as plain inputs (``kind: ess-scaling-configuration``).

pulumi-alicloud 4.0's ``ess.ScalingConfiguration`` cannot give a pool node eRDMA or require metadata
tokens: terraform-provider-alicloud (ace5bcf8, resource_alicloud_ess_scaling_configuration.go:600-603)
refuses a configuration without ``security_group_id(s)``, which ESS refuses beside ``NetworkInterfaces``,
and its schema has no ``http_tokens``. ESS's own API has both: CreateScalingConfiguration /
ModifyScalingConfiguration take ``NetworkInterfaces.N`` (InstanceType Primary | Secondary,
NetworkInterfaceTrafficMode Standard | HighPerformance = an ERI, SecurityGroupIds per interface) in place
of SecurityGroupId(s), and ``HttpTokens`` (optional | required) (alibabacloud-ess20220222 1.13.3,
models/_create_scaling_configuration_request.py:159, :228, :973-1014;
_modify_scaling_configuration_request.py:149, :213). So trainstack declares the configuration itself
(components/ess_pool.py, a dynamic resource over that SDK: trainstack.cloud.ess).

The inputs use the provider resource's own (camelCase) names, so every policy that read the provider's
ScalingConfiguration reads this one the same way (policies/_nodes.py), plus ``kind`` and ``region``.
Day two (trainstack/catalog/data/provider_facts.json ``trainstack_providers``): a new ``scalingGroupId``
or ``region`` is a new configuration (a configuration belongs to one group: scaling_group_id is ForceNew,
resource_alicloud_ess_scaling_configuration.go:45-48); every other input is ModifyScalingConfiguration,
which reaches only nodes ESS launches later (running nodes keep what they were launched with).
"""

from __future__ import annotations

from typing import Any, Optional

from ..plan import Plan
from ..tags import node_tags

KIND = "ess-scaling-configuration"
#: inputs whose change makes a new configuration (the rest: ModifyScalingConfiguration, new nodes only)
REPLACE_KEYS = ("kind", "region", "scalingGroupId")
#: outputs the provider adds (read back by DescribeScalingConfigurations)
OUTPUT_KEYS = ("scalingConfigurationId", "lifecycleState")
#: the provider resource's steps kept as plain inputs: activate the configuration in its group
#: (ModifyScalingGroup ActiveScalingConfigurationId: service_alicloud_ess.go:403-416), enable the group
#: (EnableScalingGroup: resource_alicloud_ess_scaling_configuration.go:1523-1590) and, deleting the
#: group's last configuration, delete the group with it (:1936-1990)
STEP_KEYS = ("active", "enable", "forceDelete")
HTTP_TOKENS_REQUIRED = "required"
#: inputs ModifyScalingConfiguration sends again in place (trainstack.cloud.ess.modify_request): each reaches
#: only nodes ESS launches later; a running node keeps what it was launched with
UPDATE_KEYS = ("scalingConfigurationName", "instanceName", "hostName", "instanceDescription", "instanceType",
               "imageId", "spotStrategy", "spotPriceLimits", "spotDuration", "internetMaxBandwidthOut",
               "httpEndpoint", "httpTokens", "systemDiskCategory", "systemDiskPerformanceLevel", "systemDiskSize",
               "systemDiskEncrypted", "systemDiskName", "roleName", "userData", "tags", "networkInterfaces",
               "securityGroupIds", "dataDisks", "keyName", *STEP_KEYS)


def network_interfaces(plan: Plan, security_group_id: Any) -> Optional[list[dict[str, Any]]]:
    """A pool node's interfaces on an eRDMA plan: the primary ENI (Standard: TCP, the VPC address ESS picks)
    and one Secondary HighPerformance ERI, each in the cluster security group; None otherwise."""
    if plan.network.rdma != "erdma":
        return None
    return [
        {"instanceType": "Primary", "networkInterfaceTrafficMode": "Standard", "securityGroupIds": [security_group_id]},
        {"instanceType": "Secondary", "networkInterfaceTrafficMode": "HighPerformance",
         "securityGroupIds": [security_group_id]},
    ]


def configuration_inputs(plan: Plan, *, zone: str, scaling_group_id: Any, image_id: Any, security_group_id: Any,
                         user_data: Any, role_name: Any, job_settings_digest: Any = None,
                         scale_rule: Any = None) -> dict[str, Any]:
    """Every input of the pool's scaling configuration (what `trainstack plan` shows and the provider sends)."""
    pool, st = plan.spot_pool, plan.storage
    assert pool is not None, "a scaling configuration belongs to a self-healing pool"
    node_name = plan.pool_node_name() if pool.anchor else plan.node_names()[0]
    inputs: dict[str, Any] = {
        "kind": KIND, "region": plan.region, "scalingGroupId": scaling_group_id,
        "scalingConfigurationName": f"{plan.name[:54]}-spot-node",
        "instanceName": node_name, "hostName": node_name,
        "instanceDescription": f"trainstack {plan.name}: self-healing spot GPU node",
        "instanceType": plan.instance_type, "imageId": image_id,
        "spotStrategy": "SpotWithPriceLimit",
        "spotPriceLimits": [{"instanceType": plan.instance_type, "priceLimit": pool.price_limit}],
        "spotDuration": plan.spot_duration_hours,
        "internetMaxBandwidthOut": 0,
        "httpEndpoint": "enabled", "httpTokens": HTTP_TOKENS_REQUIRED,
        "systemDiskCategory": st.system_disk_category, "systemDiskPerformanceLevel": st.system_disk_performance_level,
        "systemDiskSize": st.system_disk_gib, "systemDiskEncrypted": True, "systemDiskName": f"{node_name}-system",
        "roleName": role_name, "userData": user_data,
        "tags": node_tags(plan, zone, "pool" if pool.anchor else 0, job_settings_digest, scale_rule),
        "active": True, "enable": True, "forceDelete": True,
    }
    interfaces = network_interfaces(plan, security_group_id)
    if interfaces is not None:
        inputs["networkInterfaces"] = interfaces
    else:
        inputs["securityGroupIds"] = [security_group_id]
    disk = st.data_disk
    if disk is not None:
        inputs["dataDisks"] = [{"category": disk.category, "performanceLevel": disk.performance_level,
                                "size": disk.size_gib, "encrypted": True, "deleteWithInstance": True,
                                "name": f"{node_name}-data"}]
    if plan.network.key_pair:
        inputs["keyName"] = plan.network.key_pair
    return inputs
