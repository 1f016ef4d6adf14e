"""The self-healing pool's scaling configuration over the ESS SDK (components/ess_pool.py, trainstack/cloud/ess.py):
the requests it sends (real alibabacloud-ess20220222 request models, read back with ``to_map``), the provider
resource's ``active`` / ``enable`` steps, day two (what its diff replaces) and a configuration deleted outside
Pulumi. A fake client answers like the API; nothing reaches a network."""

from __future__ import annotations

import base64

import dill
import pytest
from alibabacloud_ess20220222 import models as m
from alibabacloud_tea_openapi.exceptions import ClientException
from plan_factory import multi_node_erdma_plan, spot_pool_plan
from pulumi.dynamic.dynamic import serialize_provider

from components import ess_pool
from components.ess_pool import EssConfigurationProvider
from trainstack.catalog.provider_facts import load_provider_facts
from trainstack.errors import CloudApiError as CloudError
from trainstack.layout.pool_configuration import KIND, REPLACE_KEYS, UPDATE_KEYS, configuration_inputs

GROUP, CONFIG = "asg-pool", "asc-new"


class FakeEss:
    """Records every call; keeps the group's configurations and lifecycle state as ESS would."""

    def __init__(self, state="Inactive", configurations=(), fail=None):
        self.calls: list[tuple[str, dict]] = []
        self.state = state
        self.configurations = list(configurations)
        self.fail = {k: list(v) for k, v in (fail or {}).items()}

    def _call(self, name, request):
        # what goes on the wire: the SDK's map without the empty lists it adds (an empty list sends nothing)
        self.calls.append((name, {k: v for k, v in request.to_map().items() if v != []}))
        queue = self.fail.get(name)
        if queue:
            raise queue.pop(0)

    def create_scaling_configuration(self, request):
        self._call("CreateScalingConfiguration", request)
        self.configurations.append(CONFIG)
        body = m.CreateScalingConfigurationResponseBody(scaling_configuration_id=CONFIG, request_id="RID")
        return m.CreateScalingConfigurationResponse(status_code=200, body=body)

    def modify_scaling_group(self, request):
        self._call("ModifyScalingGroup", request)
        return m.ModifyScalingGroupResponse(status_code=200)

    def describe_scaling_groups(self, request):
        self._call("DescribeScalingGroups", request)
        groups = [m.DescribeScalingGroupsResponseBodyScalingGroups(scaling_group_id=GROUP, lifecycle_state=self.state)]
        return m.DescribeScalingGroupsResponse(status_code=200, body=m.DescribeScalingGroupsResponseBody(
            scaling_groups=groups))

    def enable_scaling_group(self, request):
        self._call("EnableScalingGroup", request)
        self.state = "Active"
        return m.EnableScalingGroupResponse(status_code=200)

    def modify_scaling_configuration(self, request):
        self._call("ModifyScalingConfiguration", request)
        return m.ModifyScalingConfigurationResponse(status_code=200)

    def describe_scaling_configurations(self, request):
        self._call("DescribeScalingConfigurations", request)
        wanted = set(request.scaling_configuration_ids or self.configurations)
        rows = [m.DescribeScalingConfigurationsResponseBodyScalingConfigurations(
            scaling_configuration_id=c, lifecycle_state="Active", http_tokens="required")
            for c in self.configurations if c in wanted]
        return m.DescribeScalingConfigurationsResponse(status_code=200, body=m.DescribeScalingConfigurationsResponseBody(
            scaling_configurations=rows))

    def delete_scaling_configuration(self, request):
        self._call("DeleteScalingConfiguration", request)
        self.configurations.remove(request.scaling_configuration_id)
        return m.DeleteScalingConfigurationResponse(status_code=200)

    def delete_scaling_group(self, request):
        self._call("DeleteScalingGroup", request)
        self.configurations.clear()
        return m.DeleteScalingGroupResponse(status_code=200)

    def names(self):
        return [c[0] for c in self.calls]


def inputs(plan=None, **over):
    plan = plan or multi_node_erdma_plan(3, profile={"resources": {"spot": "allow", "self_healing": True,
                                                                   "max_hourly_cost": 650}})
    got = configuration_inputs(plan, zone="cn-shenzhen-c", scaling_group_id=GROUP, image_id="m-image",
                               security_group_id="sg-cluster", user_data="I2Nsb3VkLWNvbmZpZw==",
                               role_name="train-node", job_settings_digest="d" * 64,
                               scale_rule="ari:acs:ess:cn-shenzhen:1:scalingrule/asr-0")
    return {**got, **over}


def provider(client):
    return EssConfigurationProvider(client_factory=lambda region: client)


def test_create_sends_eri_interfaces_and_tokens_in_one_call_then_activates_and_enables():
    client = FakeEss(state="Inactive")
    created = provider(client).create(inputs())
    assert created.id == CONFIG and created.outs["lifecycleState"] == "Active"
    assert client.names() == ["CreateScalingConfiguration", "ModifyScalingGroup", "DescribeScalingGroups",
                              "EnableScalingGroup"]
    sent = client.calls[0][1]
    assert sent["HttpTokens"] == "required" and sent["HttpEndpoint"] == "enabled"
    assert sent["NetworkInterfaces"] == [
        {"InstanceType": "Primary", "NetworkInterfaceTrafficMode": "Standard", "SecurityGroupIds": ["sg-cluster"]},
        {"InstanceType": "Secondary", "NetworkInterfaceTrafficMode": "HighPerformance",
         "SecurityGroupIds": ["sg-cluster"]}]
    assert "SecurityGroupId" not in sent and "SecurityGroupIds" not in sent  # ESS refuses both ways at once
    assert sent["InternetMaxBandwidthOut"] == 0 and sent["SystemDisk"]["Encrypted"] is True
    assert sent["SpotStrategy"] == "SpotWithPriceLimit" and sent["RamRoleName"] == "train-node"
    assert all(d["Encrypted"] == "true" for d in sent.get("DataDisks", []))
    assert client.calls[1][1] == {"ScalingGroupId": GROUP, "ActiveScalingConfigurationId": CONFIG}
    assert client.calls[3][1]["ActiveScalingConfigurationId"] == CONFIG


def test_an_enabled_group_is_not_enabled_again():
    client = FakeEss(state="Active")
    provider(client).create(inputs())
    assert "EnableScalingGroup" not in client.names()


def test_a_family_without_eri_keeps_the_security_group_and_still_requires_tokens():
    client = FakeEss()
    provider(client).create(inputs(spot_pool_plan()))
    sent = client.calls[0][1]
    assert sent["SecurityGroupIds"] == ["sg-cluster"] and "NetworkInterfaces" not in sent
    assert sent["HttpTokens"] == "required"


def test_an_update_is_modify_scaling_configuration_with_the_same_fields():
    client = FakeEss(state="Active", configurations=[CONFIG])
    p = provider(client)
    news = inputs(imageId="m-newer")
    p.update(CONFIG, inputs(), news)
    assert client.names() == ["ModifyScalingConfiguration", "ModifyScalingGroup"]
    sent = client.calls[0][1]
    assert sent["ScalingConfigurationId"] == CONFIG and sent["ImageId"] == "m-newer"
    assert sent["HttpTokens"] == "required" and sent["NetworkInterfaces"][1]["NetworkInterfaceTrafficMode"] == \
        "HighPerformance"


@pytest.mark.parametrize("key", sorted(UPDATE_KEYS))
def test_diff_replaces_only_on_another_group_or_region(key):
    old = inputs()
    new = dict(old, **{key: "changed"})
    d = provider(FakeEss()).diff(CONFIG, old, new)
    assert d.changes and d.replaces == [] and d.delete_before_replace is False


@pytest.mark.parametrize("key", REPLACE_KEYS)
def test_a_new_group_or_region_is_a_new_configuration(key):
    old = inputs()
    d = provider(FakeEss()).diff(CONFIG, old, dict(old, **{key: "other"}))
    assert d.replaces == [key]


def test_unchanged_inputs_are_no_change_whatever_the_outputs_say():
    old = {**inputs(), "scalingConfigurationId": CONFIG, "lifecycleState": "Active", "__provider": "x"}
    assert not provider(FakeEss()).diff(CONFIG, old, inputs()).changes


def test_delete_of_the_groups_last_configuration_deletes_the_group_with_force():
    client = FakeEss(configurations=[CONFIG])
    provider(client).delete(CONFIG, inputs())
    assert client.names() == ["DescribeScalingConfigurations", "DeleteScalingGroup"]
    assert client.calls[1][1]["ForceDelete"] is True


def test_delete_of_one_of_several_configurations_deletes_it_alone():
    client = FakeEss(configurations=["asc-old", CONFIG])
    provider(client).delete(CONFIG, inputs())
    assert client.names()[-1] == "DeleteScalingConfiguration" and client.configurations == ["asc-old"]


def test_a_configuration_deleted_outside_pulumi_reads_as_gone_and_deletes_as_done():
    client = FakeEss(configurations=[])
    assert provider(client).read(CONFIG, inputs()).id == ""
    provider(client).delete(CONFIG, inputs())
    assert client.names() == ["DescribeScalingConfigurations", "DescribeScalingConfigurations"]


def test_refresh_keeps_the_inputs_and_reads_the_state():
    client = FakeEss(configurations=[CONFIG])
    got = provider(client).read(CONFIG, inputs())
    assert got.id == CONFIG and got.outs["lifecycleState"] == "Active" and got.outs["httpTokens"] == "required"
    assert got.outs["kind"] == KIND


def test_a_refused_create_is_a_cloud_error_never_a_traceback_or_a_retry():
    refused = ClientException(status_code=400, code="InvalidParameter.Conflict", request_id="RID-400",
                              message="code: 400, NetworkInterfaces conflicts with SecurityGroupId")
    client = FakeEss(fail={"CreateScalingConfiguration": [refused]})
    with pytest.raises(CloudError) as err:
        provider(client).create(inputs())
    assert client.names() == ["CreateScalingConfiguration"]  # not idempotent: never sent twice
    assert "CreateScalingConfiguration" in str(err.value) and "InvalidParameter.Conflict" in str(err.value)


def test_the_provider_pickles_without_its_client_and_uses_the_module_factory(monkeypatch):
    blob = serialize_provider(EssConfigurationProvider())
    restored = dill.loads(base64.b64decode(blob))
    assert isinstance(restored, EssConfigurationProvider) and restored.client_factory is None
    client = FakeEss()
    monkeypatch.setattr(ess_pool, "client_factory", lambda region: client)
    restored.create(inputs())
    assert client.names()[0] == "CreateScalingConfiguration"


def test_the_day_two_facts_name_every_input_the_configuration_sends():
    dyn = load_provider_facts().dynamic(KIND)
    assert dyn is not None and dyn.update_effect == "next_instance_only" and not dyn.delete_before_replace
    for plan in (spot_pool_plan(), multi_node_erdma_plan(3, profile={"resources": {
            "spot": "allow", "self_healing": True, "max_hourly_cost": 650}})):
        every = set(inputs(plan)) | {"keyName", "dataDisks", "securityGroupIds", "networkInterfaces"}
        assert every <= set(dyn.replace) | set(dyn.updated) | set(dyn.outputs)
