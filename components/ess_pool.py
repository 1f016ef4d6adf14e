"""The self-healing pool's ESS scaling configuration as a dynamic resource (``kind: ess-scaling-configuration``).

pulumi-alicloud 4.0's ``ess.ScalingConfiguration`` cannot give pool nodes eRDMA or require metadata
tokens (trainstack.layout.pool_configuration says why); this resource declares the same configuration
through Alibaba's official ESS SDK (trainstack.cloud.ess) with the primary Standard + HighPerformance
interfaces, a security group per interface and ``HttpTokens=required`` in the one CreateScalingConfiguration
call, then the provider resource's ``active`` / ``enable`` steps.

* create -> CreateScalingConfiguration, ModifyScalingGroup (active), EnableScalingGroup (enable);
* read   -> DescribeScalingConfigurations: the stored inputs, its lifecycle state; a deleted one is gone;
* diff   -> ``region`` / ``scalingGroupId`` / ``kind`` replace it (a configuration belongs to one group);
  every other input is an update;
* update -> ModifyScalingConfiguration: only nodes ESS launches later get it (running nodes keep theirs);
* delete -> DeleteScalingConfiguration; the group's last one with ``forceDelete`` deletes the group too
  (as the provider resource does), so `pulumi destroy` completes.

This module's import path is pickled into the state: it never moves. The provider holds nothing but an
optional client factory; :data:`client_factory` is a module-level name tests replace.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

import pulumi
import pulumi.dynamic as dyn

from trainstack.cloud import ess
from trainstack.layout.pool_configuration import OUTPUT_KEYS, REPLACE_KEYS

#: ``region -> client``; tests replace it.
client_factory: Callable[[str], Any] = ess.default_client


def _inputs(props: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in props.items() if k not in OUTPUT_KEYS and k != "__provider"}


class EssConfigurationProvider(dyn.ResourceProvider):
    def __init__(self, client_factory: Optional[Callable[[str], Any]] = None):
        self.client_factory = client_factory

    def _client(self, region: str) -> Any:
        return (self.client_factory or client_factory)(region)

    def create(self, props: dict[str, Any]) -> dyn.CreateResult:
        inputs = _inputs(props)
        region = inputs["region"]
        configuration_id = ess.create(self._client(region), region, inputs)
        return dyn.CreateResult(id_=configuration_id, outs={**inputs, "scalingConfigurationId": configuration_id,
                                                            "lifecycleState": "Active" if inputs.get("active")
                                                            else "Inactive"})

    def read(self, id_: str, props: dict[str, Any]) -> dyn.ReadResult:
        region, group = props.get("region"), props.get("scalingGroupId")
        state = ess.read_state(self._client(region), region, group, id_) if region and group else None
        if state is None:
            return dyn.ReadResult(id_="", outs={})  # deleted outside Pulumi: the next `pulumi up` creates it
        return dyn.ReadResult(id_=id_, outs={**props, **state})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> dyn.DiffResult:
        old, new = _inputs(olds), _inputs(news)
        changed = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        replaces = [k for k in changed if k in REPLACE_KEYS]
        return dyn.DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=False)

    def update(self, id_: str, _olds: dict[str, Any], news: dict[str, Any]) -> dyn.UpdateResult:
        inputs = _inputs(news)
        ess.modify(self._client(inputs["region"]), inputs["region"], id_, inputs)
        return dyn.UpdateResult(outs={**inputs, "scalingConfigurationId": id_,
                                      "lifecycleState": "Active" if inputs.get("active") else "Inactive"})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        ess.delete(self._client(props["region"]), props["region"], id_, str(props["scalingGroupId"]),
                   bool(props.get("forceDelete")))


class EssScalingConfiguration(dyn.Resource):
    """``scalingConfigurationId`` and ``lifecycleState``; every input as trainstack.layout.pool_configuration
    builds it."""

    scalingConfigurationId: pulumi.Output[str]
    lifecycleState: pulumi.Output[str]

    def __init__(self, name: str, inputs: Mapping[str, Any], opts: Optional[pulumi.ResourceOptions] = None):
        props = {**inputs, **{k: None for k in OUTPUT_KEYS}}
        super().__init__(EssConfigurationProvider(), name, props, opts)
