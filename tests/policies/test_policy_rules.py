"""Each policy's violation and non-violation cases, with props wrapped as the engine wraps them."""

from __future__ import annotations

import re

import pytest
from pulumi_policy import EnforcementLevel, ResourceValidationPolicy, StackValidationPolicy
from pulumi_policy.policy import _NotApplicableError
from pulumi_policy.proxy import UnknownValueError

from policies.rules import ALL_POLICIES, DEFAULT_ENFORCEMENT, catalog
from policy_testkit import (
    DISK, DYNAMIC, ECS_DISK, ENI, ENI_ATTACHMENT, INSTANCE, INSTANCE_SET, LAUNCH_TEMPLATE, NAS, OSS,
    SCALING_CONFIGURATION, SCALING_GROUP, SECURITY_GROUP, SG_RULE, UNKNOWN, UNKNOWN_NUMBER, VPC, one, res,
    stack_violations, training_node, violations, wrap,
)

PCIE_8 = "ecs.gn7i-8x.32xlarge"      # 8 x A10, PCIe only
NVLINK_8 = "ecs.gn7e-c16g1.32xlarge"  # 8 x A100 80G, NVLink, no RDMA
PCIE_1 = "ecs.gn7i-c8g1.2xlarge"      # 1 x A10
ERDMA_8 = "ecs.ebmgn7ex.32xlarge"     # 8 x A100 80G, NVLink, eRDMA
ROCE_8 = "ecs.sccgn7ex.32xlarge"      # 8 x A100 80G, NVSwitch, RoCE
HP = {"networkInterfaceTrafficMode": "HighPerformance"}


def test_catalog_facts_the_cases_rest_on():
    cat = catalog()
    facts = {t: (cat.instance(t).gpu_count, cat.instance(t).interconnect, cat.instance(t).rdma)
             for t in (PCIE_8, NVLINK_8, PCIE_1, ERDMA_8, ROCE_8)}
    assert facts == {PCIE_8: (8, "pcie", "none"), NVLINK_8: (8, "nvlink", "none"), PCIE_1: (1, "pcie", "none"),
                     ERDMA_8: (8, "nvlink", "erdma"), ROCE_8: (8, "nvswitch", "roce")}


# ---- pack shape -------------------------------------------------------------------------------
def test_every_policy_is_kebab_case_checks_whether_and_has_its_default_level():
    assert [p.name for p in ALL_POLICIES] == list(DEFAULT_ENFORCEMENT)
    for p in ALL_POLICIES:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", p.name), p.name
        assert p.description.startswith("Checks whether "), p.name
        assert p.enforcement_level == DEFAULT_ENFORCEMENT[p.name]
    advisory = {n for n, lv in DEFAULT_ENFORCEMENT.items() if lv == EnforcementLevel.ADVISORY}
    assert advisory == {"checkpoint-storage-protected", "required-tags", "self-healing-over-tcp"}
    assert DEFAULT_ENFORCEMENT["metadata-tokens-required"] == EnforcementLevel.MANDATORY  # issue 33
    stack = {p.name for p in ALL_POLICIES if isinstance(p, StackValidationPolicy)}
    assert stack == {"multi-node-requires-rdma", "spot-requires-checkpoint-storage", "gpu-hourly-budget",
                     "self-healing-over-tcp"}
    assert all(isinstance(p, ResourceValidationPolicy) for p in ALL_POLICIES if p.name not in stack)


def test_policies_with_knobs_have_config_schemas():
    schemas = {p.name: set(p.config_schema.properties) for p in ALL_POLICIES if p.config_schema}
    assert schemas == {"no-pcie-multi-gpu-training": {"allowed_types"},
                       "gpu-hourly-budget": {"max_hourly_cost_cny", "region"},
                       "required-tags": {"required_tags"}}


def test_engine_wrapping_gives_floats_and_raises_on_unknowns():
    props = wrap({"size": 1000, "deploymentSetId": UNKNOWN})
    assert props["size"] == 1000.0 and isinstance(props["size"], float)
    with pytest.raises(UnknownValueError):
        _ = "deploymentSetId" in props  # why the policies never read through the proxy


# ---- 1. no-pcie-multi-gpu-training ------------------------------------------------------------
def test_multi_gpu_gn7i_training_node_is_blocked_with_nvlink_alternatives():
    msg = one(violations("no-pcie-multi-gpu-training", INSTANCE, training_node(PCIE_8), name="node-0"),
              "node-0: ecs.gn7i-8x.32xlarge has 8 A10 GPUs on PCIe only", "needs NVLink: use ")
    for alt in catalog().nvlink_alternatives(8):
        assert alt in msg


def test_eight_gpu_gn7e_and_single_gpu_gn7i_are_allowed():
    assert violations("no-pcie-multi-gpu-training", INSTANCE, training_node(NVLINK_8)) == []
    assert violations("no-pcie-multi-gpu-training", INSTANCE, training_node(PCIE_1)) == []


def test_pcie_multi_gpu_not_for_training_is_not_judged():
    inputs = training_node(PCIE_8)
    inputs["tags"] = {"trainstack:role": "inference"}
    assert violations("no-pcie-multi-gpu-training", INSTANCE, inputs) == []


def test_allow_list_config_accepts_a_pcie_type():
    cfg = {"allowed_types": [PCIE_8]}
    assert violations("no-pcie-multi-gpu-training", INSTANCE, training_node(PCIE_8), config=cfg) == []


def test_scaling_configuration_types_and_dlc_specs_are_checked():
    inputs = {"scalingGroupId": UNKNOWN, "instanceTypes": [NVLINK_8, PCIE_8],
              "tags": {"trainstack:role": "training"}}
    one(violations("no-pcie-multi-gpu-training", SCALING_CONFIGURATION, inputs, name="asg"), "asg: " + PCIE_8)
    dlc = {"kind": "pai-dlc-job", "ecsSpec": "ecs.gn7i-4x.16xlarge", "podCount": 2}
    one(violations("no-pcie-multi-gpu-training", DYNAMIC, dlc, name="job"), "job: ecs.gn7i-4x.16xlarge has 4")
    one_gpu_each = {"kind": "pai-dlc-job", "ecs_spec": "ecs.gn7i-4x.16xlarge", "pod_count": 2, "gpus_per_pod": 1}
    assert violations("no-pcie-multi-gpu-training", DYNAMIC, one_gpu_each) == []


# ---- 2. multi-node-requires-rdma --------------------------------------------------------------
def _nodes(instance_type: str, n: int = 2, zones=None, **extra):
    zones = zones or ["cn-shenzhen-f"] * n
    return [res(INSTANCE, f"node-{i}", training_node(instance_type, zone=zones[i], **extra)) for i in range(n)]


def test_two_node_cluster_without_erdma_is_blocked():
    msgs = stack_violations("multi-node-requires-rdma", _nodes(NVLINK_8))
    assert len(msgs) == 2
    assert "node-0: ecs.gn7e-c16g1.32xlarge has no RDMA" in msgs[0]
    assert "2 training nodes need RDMA between nodes: use " in msgs[0] and ERDMA_8 in msgs[0]


def test_erdma_nodes_with_high_performance_interfaces_in_one_zone_pass():
    assert stack_violations("multi-node-requires-rdma", _nodes(ERDMA_8, **HP)) == []
    secondary = {"networkInterfaces": {"networkInterfaceTrafficMode": "HighPerformance", "vswitchId": UNKNOWN}}
    assert stack_violations("multi-node-requires-rdma", _nodes(ERDMA_8, **secondary)) == []


def test_erdma_types_without_high_performance_interface_are_blocked():
    msgs = stack_violations("multi-node-requires-rdma", _nodes(ERDMA_8))
    assert len(msgs) == 2
    assert all("supports eRDMA but no HighPerformance interface is configured" in m for m in msgs)


def test_high_performance_eni_attached_through_dependencies_counts():
    nodes = _nodes(ERDMA_8)
    resources = list(nodes)
    for i, node in enumerate(nodes):
        eni = res(ENI, f"eri-{i}", {"vswitchId": UNKNOWN, **HP})
        resources += [eni, res(ENI_ATTACHMENT, f"eri-att-{i}", {"instanceId": UNKNOWN, "networkInterfaceId": UNKNOWN},
                               depends={"instanceId": [node], "networkInterfaceId": [eni]})]
    assert stack_violations("multi-node-requires-rdma", resources) == []
    standard = [res(ENI, "eni", {"vswitchId": UNKNOWN, "networkInterfaceTrafficMode": "Standard"})]
    resources = nodes + standard + [res(ENI_ATTACHMENT, "att", {"instanceId": UNKNOWN},
                                        depends={"instanceId": [nodes[0]], "networkInterfaceId": standard})]
    assert len(stack_violations("multi-node-requires-rdma", resources)) == 2


def test_roce_needs_no_high_performance_interface():
    assert stack_violations("multi-node-requires-rdma", _nodes(ROCE_8)) == []


def test_zone_mismatch_and_missing_zone_are_blocked():
    msgs = stack_violations("multi-node-requires-rdma", _nodes(ERDMA_8, 3, ["cn-shenzhen-f", "cn-shenzhen-e",
                                                                        "cn-shenzhen-f"], **HP))
    one(msgs, "training nodes span 2 zones", "cn-shenzhen-e: node-1", "cn-shenzhen-f: node-0, node-2")
    nodes = _nodes(ERDMA_8, **HP)
    untagged = training_node(ERDMA_8, **HP)
    del untagged["tags"]["trainstack:zone"]
    one(stack_violations("multi-node-requires-rdma", nodes[:1] + [res(INSTANCE, "node-x", untagged)]),
        "node-x: training node has no trainstack:zone tag")


def test_single_node_and_non_training_nodes_need_no_rdma():
    assert stack_violations("multi-node-requires-rdma", _nodes(NVLINK_8, 1)) == []
    inference = training_node(NVLINK_8)
    inference["tags"]["trainstack:role"] = "inference"
    assert stack_violations("multi-node-requires-rdma",
                            _nodes(NVLINK_8, 1) + [res(INSTANCE, "serve", inference)]) == []


def test_scaling_group_size_counts_as_nodes():
    group = res(SCALING_GROUP, "asg", {"minSize": 0, "maxSize": 4})
    config = res(SCALING_CONFIGURATION, "asg-cfg",
                 {"scalingGroupId": UNKNOWN, "instanceType": NVLINK_8,
                  "tags": {"trainstack:role": "training", "trainstack:zone": "cn-shenzhen-f"}},
                 depends={"scalingGroupId": [group]})
    one(stack_violations("multi-node-requires-rdma", [group, config]), "asg-cfg", "4 training nodes")


def _healing_cluster(instance_type):
    """trainstack's multi-node self-healing shape: node 0 plus an ESS pool of 2 (no HighPerformance)."""
    group = res(SCALING_GROUP, "pool", {"minSize": 2, "maxSize": 2})
    config = res(SCALING_CONFIGURATION, "pool-cfg",
                 {"scalingGroupId": UNKNOWN, "instanceType": instance_type,
                  "tags": {"trainstack:role": "training", "trainstack:zone": "cn-shenzhen-f"}},
                 depends={"scalingGroupId": [group]})
    return _nodes(instance_type, 1) + [group, config]


def test_a_self_healing_cluster_over_tcp_is_advisory_not_blocked():
    """Issue 23: a provider ScalingConfiguration cannot give pool nodes eRDMA, so the cluster talks TCP;
    self-healing-over-tcp reports it (advisory), multi-node-requires-rdma does not block it."""
    resources = _healing_cluster(ERDMA_8)
    assert stack_violations("multi-node-requires-rdma", resources) == []
    msgs = stack_violations("self-healing-over-tcp", resources)
    assert len(msgs) == 2 and all("no HighPerformance interface" in m and "NCCL talks TCP" in m for m in msgs)
    # an RDMA-class type and one zone are still required, and plain clusters are not reported
    blocked = stack_violations("multi-node-requires-rdma", _healing_cluster(NVLINK_8))
    assert len(blocked) == 2 and all("has no RDMA" in m for m in blocked)
    assert stack_violations("self-healing-over-tcp", _nodes(ERDMA_8)) == []


def test_dlc_job_with_several_pods_needs_rdma_enabled_and_an_rdma_spec():
    job = {"kind": "pai-dlc-job", "ecs_spec": ERDMA_8, "pod_count": 2, "enable_rdma": False}
    one(stack_violations("multi-node-requires-rdma", [res(DYNAMIC, "job", job)]), "job: DLC job with 2 pods",
        "enable_rdma")
    job_ok = {"kind": "pai-dlc-job", "ecsSpec": ERDMA_8, "podCount": 2, "enableRdma": True}
    assert stack_violations("multi-node-requires-rdma", [res(DYNAMIC, "job", job_ok)]) == []
    no_rdma = {"kind": "pai-dlc-job", "ecs_spec": NVLINK_8, "pod_count": 2, "enable_rdma": True}
    one(stack_violations("multi-node-requires-rdma", [res(DYNAMIC, "job", no_rdma)]), "job: " + NVLINK_8,
        "has no RDMA")


# ---- 3. spot-requires-checkpoint-storage ------------------------------------------------------
def _spot_nodes(strategy="SpotWithPriceLimit"):
    return _nodes(ERDMA_8, **HP, spotStrategy=strategy, spotPriceLimit=100.0)


CKPT = {"trainstack:role": "checkpoint", "trainstack:name": "test"}


def test_spot_nodes_without_checkpoint_storage_are_blocked():
    one(stack_violations("spot-requires-checkpoint-storage", _spot_nodes("SpotAsPriceGo")),
        "node-0, node-1: spot GPU nodes", "no checkpoint storage that outlives them")


@pytest.mark.parametrize("storage", [
    (NAS, {"fileSystemType": "cpfs", "protocolType": "cpfs", "storageType": "advance_100", "tags": CKPT}),
    (NAS, {"fileSystemType": "standard", "protocolType": "NFS", "storageType": "Performance", "tags": CKPT}),
    (OSS, {"bucket": "ckpt", "tags": CKPT}),
    (ECS_DISK, {"category": "cloud_essd", "size": 100, "deleteWithInstance": False, "tags": CKPT}),
    (DISK, {"category": "cloud_essd", "size": 100, "tags": CKPT}),
])
def test_spot_nodes_with_checkpoint_storage_pass(storage):
    type_, inputs = storage
    assert stack_violations("spot-requires-checkpoint-storage",
                            _spot_nodes() + [res(type_, "ckpt", inputs)]) == []


@pytest.mark.parametrize("storage", [
    (OSS, {"bucket": "job-settings"}),  # any bucket used to pass: every ECS stack has one for its job settings
    (OSS, {"bucket": "stack", "tags": {"trainstack:role": "stack"}}),
    (NAS, {"fileSystemType": "cpfs", "tags": {"trainstack:role": "dataset"}}),
    (ECS_DISK, {"category": "cloud_essd", "size": 100, "deleteWithInstance": True, "tags": CKPT}),
    (ECS_DISK, {"category": "cloud_essd", "size": 100, "deleteWithInstance": UNKNOWN, "tags": CKPT}),
])
def test_storage_that_does_not_hold_checkpoints_past_a_reclaim_does_not_count(storage):
    type_, inputs = storage
    one(stack_violations("spot-requires-checkpoint-storage", _spot_nodes() + [res(type_, "other", inputs)]),
        "spot GPU nodes")


def test_an_unknown_role_cannot_be_judged_unless_checkpoint_storage_is_known():
    unknown_role = res(OSS, "bucket", {"bucket": "b", "tags": {"trainstack:role": UNKNOWN}})
    with pytest.raises(UnknownValueError):
        stack_violations("spot-requires-checkpoint-storage", _spot_nodes() + [unknown_role])
    known = res(OSS, "ckpt", {"bucket": "ckpt", "tags": CKPT})
    assert stack_violations("spot-requires-checkpoint-storage", _spot_nodes() + [unknown_role, known]) == []


def test_on_demand_nodes_need_no_shared_storage_and_dlc_spot_does():
    assert stack_violations("spot-requires-checkpoint-storage", _nodes(ERDMA_8, **HP)) == []
    job = {"kind": "pai-dlc-job", "ecs_spec": NVLINK_8, "pod_count": 1, "spot": True}
    one(stack_violations("spot-requires-checkpoint-storage", [res(DYNAMIC, "job", job)]), "job: spot GPU nodes")


# ---- 4. essd-minimum-size ---------------------------------------------------------------------
def _disk(pl, size, category="cloud_essd"):
    return {"category": category, "performanceLevel": pl, "size": size, "encrypted": True}


def test_pl3_data_disk_at_1000_gib_is_blocked():
    one(violations("essd-minimum-size", INSTANCE, training_node(NVLINK_8, dataDisks=[_disk("PL1", 100),
                                                                                    _disk("PL3", 1000)]),
                   name="node-0"),
        "node-0: data disk 1 is cloud_essd PL3 at 1000 GiB; PL3 needs at least 1261 GiB", "use PL2")


def test_disks_at_their_minimum_or_not_essd_pass():
    disks = [_disk("PL3", 1261), _disk("PL2", 461), _disk("PL1", 20), _disk("PL0", 1),
             _disk(None, 20), _disk("PL3", 100, category="cloud_auto")]
    disks[4].pop("performanceLevel")
    assert violations("essd-minimum-size", INSTANCE, training_node(NVLINK_8, dataDisks=disks)) == []


def test_standalone_disks_system_disks_sets_and_templates_are_checked():
    one(violations("essd-minimum-size", ECS_DISK, _disk("PL2", 400), name="ckpt"), "ckpt: disk is cloud_essd PL2 "
        "at 400 GiB; PL2 needs at least 461 GiB")
    one(violations("essd-minimum-size", DISK, _disk("PL3", 500)), "PL3 needs at least 1261 GiB")
    one(violations("essd-minimum-size", INSTANCE, training_node(NVLINK_8, systemDiskCategory="cloud_essd",
                                                                systemDiskPerformanceLevel="PL2",
                                                                systemDiskSize=200)), "system disk")
    one(violations("essd-minimum-size", INSTANCE_SET, {"instanceType": NVLINK_8, "dataDisks": [
        {"diskCategory": "cloud_essd", "performanceLevel": "PL3", "diskSize": 1000}]}), "data disk 0")
    one(violations("essd-minimum-size", LAUNCH_TEMPLATE, {"systemDisk": _disk("PL3", 200)}), "system disk")
    one(violations("essd-minimum-size", SCALING_CONFIGURATION, {"dataDisks": [_disk("PL2", 100)]}),
        "PL2 needs at least 461")


def test_unknown_disk_size_cannot_be_judged():
    with pytest.raises(UnknownValueError):
        violations("essd-minimum-size", ECS_DISK, _disk("PL3", UNKNOWN_NUMBER))


# ---- 5. no-public-ssh -------------------------------------------------------------------------
def _rule(**kw):
    rule = {"type": "ingress", "ipProtocol": "tcp", "portRange": "22/22", "cidrIp": "0.0.0.0/0",
            "securityGroupId": UNKNOWN, "policy": "accept"}
    rule.update(kw)
    return {k: v for k, v in rule.items() if v is not None}


@pytest.mark.parametrize("rule, shown", [
    (_rule(), "opens port 22 to 0.0.0.0/0"),
    (_rule(cidrIp=None, ipv6CidrIp="::/0"), "opens port 22 to ::/0"),
    (_rule(ipProtocol="all", portRange="-1/-1"), "opens all ports"),
    (_rule(portRange="1/65535"), "opens all ports (1/65535)"),
    (_rule(portRange="20/30"), "opens ports 20/30 (including 22)"),
    (_rule(policy=None), "opens port 22"),
])
def test_ssh_open_to_the_internet_is_blocked(rule, shown):
    one(violations("no-public-ssh", SG_RULE, rule, name="ssh-in"), "ssh-in: ingress rule " + shown)


@pytest.mark.parametrize("rule", [
    _rule(cidrIp="203.0.113.0/24"),
    _rule(cidrIp=None, ipv6CidrIp="2001:db8::/32"),
    _rule(type="egress"),
    _rule(policy="drop"),
    _rule(ipProtocol="udp"),
    _rule(portRange="443/443"),
])
def test_restricted_or_unrelated_rules_pass(rule):
    assert violations("no-public-ssh", SG_RULE, rule) == []


def test_no_public_ssh_ignores_other_resources():
    assert violations("no-public-ssh", SECURITY_GROUP, {"vpcId": UNKNOWN, "cidrIp": "0.0.0.0/0"}) == []


# ---- 6. gpu-hourly-budget ---------------------------------------------------------------------
def _price(t, region="cn-shenzhen"):
    return catalog().quote(region, t).on_demand_cny_per_hour


def test_budget_is_not_applicable_until_configured():
    with pytest.raises(_NotApplicableError):
        stack_violations("gpu-hourly-budget", _nodes(NVLINK_8))


def test_budget_exceeded_by_on_demand_nodes():
    total = 2 * _price(NVLINK_8)
    one(stack_violations("gpu-hourly-budget", _nodes(NVLINK_8), {"max_hourly_cost_cny": 500.0}),
        f"GPU nodes cost {total:,.2f} CNY/h, above max_hourly_cost_cny 500.00", "(on-demand)")
    assert stack_violations("gpu-hourly-budget", _nodes(NVLINK_8), {"max_hourly_cost_cny": total + 1}) == []


def test_spot_nodes_are_priced_at_their_spot_price_limit():
    cheap = _nodes(NVLINK_8, spotStrategy="SpotWithPriceLimit", spotPriceLimit=100.0)
    assert stack_violations("gpu-hourly-budget", cheap, {"max_hourly_cost_cny": 300.0}) == []
    dear = _nodes(NVLINK_8, spotStrategy="SpotWithPriceLimit", spotPriceLimit=200.0)
    one(stack_violations("gpu-hourly-budget", dear, {"max_hourly_cost_cny": 300.0}),
        "GPU nodes cost 400.00 CNY/h", "200.00 (spot price limit)")
    as_price_go = _nodes(NVLINK_8, spotStrategy="SpotAsPriceGo")
    one(stack_violations("gpu-hourly-budget", as_price_go, {"max_hourly_cost_cny": 300.0}),
        "(on-demand cap of spot)")


def test_budget_prices_in_the_providers_region_else_config_region():
    node = training_node(PCIE_1)
    cfg = {"max_hourly_cost_cny": 1.0}
    in_provider = stack_violations("gpu-hourly-budget", [res(INSTANCE, "n", node, region="ap-southeast-1")], cfg)
    one(in_provider, f"{_price(PCIE_1, 'ap-southeast-1'):,.2f}")
    in_config = stack_violations("gpu-hourly-budget", [res(INSTANCE, "n", node)], {**cfg, "region": "cn-heyuan"})
    one(in_config, f"{_price(PCIE_1, 'cn-heyuan'):,.2f}")


def test_unpriced_node_is_reported_as_unverified_not_as_a_violation():
    gn8v = "ecs.gn8v-8x.48xlarge"
    assert catalog().knows(gn8v) and _price(gn8v, "us-east-1") is None
    with pytest.raises(UnknownValueError) as exc:
        stack_violations("gpu-hourly-budget", [res(INSTANCE, "n", training_node(gn8v), region="us-east-1")],
                         {"max_hourly_cost_cny": 1000.0})
    assert "no price for n (ecs.gn8v-8x.48xlarge in us-east-1)" in exc.value.message


def test_scaling_group_and_dlc_job_costs_count_every_machine():
    group = res(SCALING_GROUP, "asg", {"minSize": 0, "maxSize": 3})
    cfg = res(SCALING_CONFIGURATION, "asg-cfg", {"instanceType": PCIE_1, "tags": {"trainstack:role": "training"}},
              depends={"scalingGroupId": [group]})
    one(stack_violations("gpu-hourly-budget", [group, cfg], {"max_hourly_cost_cny": 1.0}),
        f"{3 * _price(PCIE_1):,.2f} CNY/h", "asg-cfg (x3)")
    job = res(DYNAMIC, "job", {"kind": "pai-dlc-job", "ecs_spec": PCIE_1, "pod_count": 4})
    one(stack_violations("gpu-hourly-budget", [job], {"max_hourly_cost_cny": 1.0}), f"{4 * _price(PCIE_1):,.2f}")


# ---- 7. known-instance-type -------------------------------------------------------------------
def test_unknown_gpu_type_is_blocked_with_did_you_mean():
    one(violations("known-instance-type", INSTANCE, training_node("ecs.gn7-xlarge"), name="node-0"),
        "node-0: unknown instance type: ecs.gn7-xlarge; did you mean ecs.gn7-")


def test_known_types_and_non_training_cpu_types_pass():
    assert violations("known-instance-type", INSTANCE, training_node(NVLINK_8)) == []
    assert violations("known-instance-type", INSTANCE, {"instanceType": "ecs.g7.xlarge"}) == []
    assert violations("known-instance-type", INSTANCE, {"instanceType": "ecs.vgn6i-m4.xlarge"}) == []


def test_training_nodes_and_dlc_specs_must_be_catalog_types():
    one(violations("known-instance-type", INSTANCE, training_node("ecs.g7.xlarge")), "ecs.g7.xlarge")
    one(violations("known-instance-type", INSTANCE, training_node("ecs.vgn6i-m4.xlarge")),
        "not in the catalog (vGPU slice")
    one(violations("known-instance-type", DYNAMIC, {"kind": "pai-dlc-job", "ecs_spec": "ecs.gn7e-c16g1.64xlarge"},
                   name="job"), "job: unknown instance type: ecs.gn7e-c16g1.64xlarge; did you mean")
    one(violations("known-instance-type", INSTANCE, {"instanceType": "ecs.gn7i-c8g1.xlarge"}), "did you mean")


def test_unknown_instance_type_value_cannot_be_judged():
    with pytest.raises(UnknownValueError):
        violations("known-instance-type", INSTANCE, training_node(UNKNOWN))


# ---- 8. no-spot-in-deployment-set -------------------------------------------------------------
def test_spot_instance_in_deployment_set_is_blocked_even_when_the_id_is_unknown():
    inputs = training_node(ERDMA_8, spotStrategy="SpotAsPriceGo", deploymentSetId=UNKNOWN)
    one(violations("no-spot-in-deployment-set", INSTANCE, inputs, name="node-0"),
        "node-0: spot instance (SpotAsPriceGo) in a deployment set", "drop deploymentSetId")
    known = training_node(ERDMA_8, spotStrategy="SpotWithPriceLimit", deploymentSetId="ds-123")
    one(violations("no-spot-in-deployment-set", INSTANCE, known), "in deployment set ds-123")


def test_on_demand_in_deployment_set_and_spot_outside_pass():
    assert violations("no-spot-in-deployment-set", INSTANCE, training_node(ERDMA_8, deploymentSetId=UNKNOWN)) == []
    assert violations("no-spot-in-deployment-set", INSTANCE, training_node(ERDMA_8, spotStrategy="SpotAsPriceGo")) == []
    assert violations("no-spot-in-deployment-set", INSTANCE,
                      training_node(ERDMA_8, spotStrategy="SpotAsPriceGo", deploymentSetId="")) == []


# ---- 9. checkpoint-storage-protected, required-tags -------------------------------------------
def test_unprotected_checkpoint_storage_is_reported():
    bucket = {"bucket": "ckpt", "tags": {"trainstack:role": "checkpoint"}}
    one(violations("checkpoint-storage-protected", OSS, bucket, name="ckpt"), "ckpt: checkpoint storage is not "
        "protected: set protect=True")
    assert violations("checkpoint-storage-protected", OSS, bucket, protect=True) == []
    assert violations("checkpoint-storage-protected", NAS, {"tags": {"trainstack:role": "dataset"}}) == []


def test_required_tags_default_and_configured():
    one(violations("required-tags", VPC, {"cidrBlock": "10.0.0.0/16"}, name="vpc"), "vpc: missing tag trainstack:name")
    assert violations("required-tags", VPC, {"tags": {"trainstack:name": "llama3-8b-lora"}}) == []
    cfg = {"required_tags": ["trainstack:role", "team", "owner"]}
    one(violations("required-tags", INSTANCE, training_node(NVLINK_8), config=cfg), "missing tag owner: add it")
    ram_role = {"roleName": "x", "tags": {"team": "nlp"}}  # any resource with tags is judged
    one(violations("required-tags", "alicloud:ram/role:Role", ram_role), "missing tag trainstack:name")
    cfg = {"required_tags": ["owner", "cost-center"]}
    one(violations("required-tags", VPC, {"tags": {"owner": " "}}, config=cfg), "missing tags owner, cost-center")
    assert violations("required-tags", SG_RULE, _rule()) == []
    assert violations("required-tags", DYNAMIC, {"kind": "pai-dlc-job", "ecs_spec": NVLINK_8}) == []


# ---- issue 33: trainstack's own scaling configuration (kind: ess-scaling-configuration) ------------------

def _ess_config(name="pool-cfg", interfaces=True, tokens="required", **extra):
    inputs = {"kind": "ess-scaling-configuration", "region": "cn-shenzhen", "scalingGroupId": UNKNOWN,
              "instanceType": ERDMA_8, "spotStrategy": "SpotWithPriceLimit", "httpEndpoint": "enabled",
              "systemDiskCategory": "cloud_essd", "systemDiskPerformanceLevel": "PL1", "systemDiskSize": 200,
              "spotPriceLimits": [{"instanceType": ERDMA_8, "priceLimit": 100.0}],
              "tags": {"trainstack:role": "training", "trainstack:zone": "cn-shenzhen-f"}, **extra}
    if tokens is not None:
        inputs["httpTokens"] = tokens
    if interfaces:
        inputs["networkInterfaces"] = [
            {"instanceType": "Primary", "networkInterfaceTrafficMode": "Standard", "securityGroupIds": ["sg-1"]},
            {"instanceType": "Secondary", "networkInterfaceTrafficMode": "HighPerformance",
             "securityGroupIds": ["sg-1"]}]
    else:
        inputs["securityGroupIds"] = ["sg-1"]
    return inputs


def _ess_cluster(**kw):
    group = res(SCALING_GROUP, "pool", {"minSize": 0, "maxSize": 2})
    config = res(DYNAMIC, "pool-cfg", _ess_config(**kw), depends={"scalingGroupId": [group]})
    return _nodes(ERDMA_8, 1, **HP) + [group, config]  # node 0 with its own HighPerformance primary ENI


def test_the_eri_pool_is_a_healing_cluster_over_erdma_and_no_policy_reports_tcp():
    resources = _ess_cluster()
    assert stack_violations("self-healing-over-tcp", resources) == []
    assert stack_violations("multi-node-requires-rdma", resources) == []
    # without the HighPerformance interface the same cluster talks TCP, and the policy says so
    tcp = stack_violations("self-healing-over-tcp", _ess_cluster(interfaces=False))
    assert len(tcp) == 1 and tcp[0].startswith("pool-cfg: ")


def test_the_pool_counts_its_groups_size_for_the_budget_and_its_type_is_judged():
    resources = _ess_cluster()
    over = stack_violations("gpu-hourly-budget", resources, config={"max_hourly_cost_cny": 1})
    assert len(over) == 1 and "pool-cfg" in over[0]
    one(violations("known-instance-type", DYNAMIC, _ess_config(instanceType="ecs.gn7i-c8g1.24xlarge")),
        "ecs.gn7i-c8g1.24xlarge")
    one(violations("essd-minimum-size", DYNAMIC, _ess_config(systemDiskPerformanceLevel="PL2")), "system disk")


@pytest.mark.parametrize("tokens", [None, "optional"])
def test_metadata_tokens_are_required_on_the_pool_configuration(tokens):
    one(violations("metadata-tokens-required", DYNAMIC, _ess_config(tokens=tokens)), "httpTokens")
    assert violations("metadata-tokens-required", DYNAMIC, _ess_config()) == []


def test_the_providers_scaling_configuration_cannot_require_tokens_and_is_refused():
    one(violations("metadata-tokens-required", SCALING_CONFIGURATION,
                   {"instanceType": ERDMA_8, "httpEndpoint": "enabled"}), "cannot require metadata tokens",
        "ess-scaling-configuration")


def test_other_dynamic_resources_are_no_nodes_and_no_instances():
    assert violations("metadata-tokens-required", DYNAMIC, {"kind": "ecs-queue-pairs", "instance_type": ERDMA_8}) == []
    assert violations("known-instance-type", DYNAMIC, {"kind": "cpfs-export-address", "instanceType": "x"}) == []
