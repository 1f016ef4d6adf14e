"""Pulumi mock engine for component tests: records every registration (type, name, parent,
inputs in wire form, protect / retain_on_delete, provider) and every invoke.

Use the ``engine`` fixture: ``engine.run(lambda: TrainingStack(...))`` declares resources under
mocks (``preview=False``) and waits until every registration has finished.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, Optional

import pulumi
import pytest
from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockMonitor
from pulumi.runtime.sync_await import _sync_await

ZONES = ["cn-shenzhen-e", "cn-shenzhen-f"]
CPFS_ZONES = ["cn-shenzhen-f"]
IMAGE_ID = "m-wz9mockimage0000001"
CPFS_DOMAIN = "cpfs-0123abcd-mock.cn-shenzhen.cpfs.aliyuncs.com"
ACCOUNT_ID = "1234567890123456"
#: what DescribeInstanceTypes QueuePairNumber answers in these tests (QueuePairsPerEri)
QUEUE_PAIRS = 64


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    parent: str
    custom: bool
    protect: bool
    retain_on_delete: bool
    provider: str
    dependencies: list[str]
    ignore_changes: list[str]
    inputs: dict[str, Any]
    delete_before_replace: bool = False


class RecordingMocks(pulumi.runtime.Mocks):
    """Returns plausible ids and computed outputs; answers the invokes the components use."""

    def __init__(self, zones: Optional[list[str]] = None, images: Optional[list[str]] = None,
                 cpfs_zones: Optional[list[str]] = None, stock: Optional[dict[str, list[str]]] = None,
                 vswitches: Optional[list[dict]] = None):
        self.zones = ZONES if zones is None else zones
        #: zones with stock per spot strategy (getInstanceTypes; default: every zone of ``zones``)
        self.stock = stock
        #: existing vSwitches getSwitches finds ({"vswitchName", "zoneId", "tags"}); default none
        self.vswitches = vswitches or []
        self.cpfs_zones = CPFS_ZONES if cpfs_zones is None else cpfs_zones
        self.images = [IMAGE_ID] if images is None else images
        self.cpfs_domain = CPFS_DOMAIN
        self.calls: list[tuple[str, dict]] = []
        self.call_providers: list[str] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = dict(args.inputs)
        short = args.typ.rsplit(":", 1)[-1]
        rid = f"{short.lower()}-{args.name}"
        if short == "Instance":
            state.setdefault("status", "Running")
        elif short == "NatGateway":
            state["snatTableIds"] = f"stb-{args.name}"
        elif short == "EipAddress":
            state["ipAddress"] = "47.106.0.10"
        elif short == "ProtocolService":
            state["protocolServiceId"] = f"ptc-{args.name}"
        elif short == "Bucket":
            state["intranetEndpoint"] = "oss-cn-shenzhen-internal.aliyuncs.com"
        elif short == "Role":
            rid = state.get("roleName", rid)
        elif short == "Policy":
            rid = state.get("policyName", rid)
        elif short == "ScalingRule":  # what ESS answers: the rule's ARI (ExecuteScalingRule's ScalingRuleAri)
            state["ari"] = f"ari:acs:ess:cn-shenzhen:{ACCOUNT_ID}:scalingrule/asr-{args.name}"
        elif short == "ProtocolMountTarget":
            state["exportId"] = f"exp-{args.name}"
        elif args.typ == "pulumi-python:dynamic:Resource" and state.get("kind") == "cpfs-export-address":
            state["domain"] = self.cpfs_domain
        elif args.typ == "pulumi-python:dynamic:Resource" and state.get("kind") == "ecs-queue-pairs":
            state.update(max=QUEUE_PAIRS, per_eri=QUEUE_PAIRS // int(state["eris"]))
        return rid, state

    def call(self, args: pulumi.runtime.MockCallArgs):
        self.calls.append((args.token, dict(args.args)))
        self.call_providers.append(args.provider)
        if args.token == "alicloud:index/getZones:getZones":
            return {"ids": list(self.zones), "zones": [{"id": z} for z in self.zones]}
        if args.token == "alicloud:nas/getZones:getZones":
            return {"zones": [{"zoneId": z} for z in self.cpfs_zones]}
        if args.token == "alicloud:index/getCallerIdentity:getCallerIdentity":
            return {"accountId": ACCOUNT_ID, "id": ACCOUNT_ID, "identityType": "Account"}
        if args.token == "alicloud:ecs/getInstanceTypes:getInstanceTypes":
            itype, strategy = args.args.get("instanceType"), args.args.get("spotStrategy") or "NoSpot"
            zones = list(self.zones) if self.stock is None else list(self.stock.get(strategy, []))
            return {"ids": [itype], "instanceTypes": [{"id": itype, "availabilityZones": zones}] if zones else []}
        if args.token == "alicloud:vpc/getSwitches:getSwitches":
            import re

            pattern, want = args.args.get("nameRegex"), args.args.get("tags") or {}
            found = [v for v in self.vswitches if (not pattern or re.search(pattern, v["vswitchName"]))
                     and all(v.get("tags", {}).get(k) == val for k, val in want.items())]
            return {"ids": [f"vsw-{v['vswitchName']}" for v in found],
                    "vswitches": [{"id": f"vsw-{v['vswitchName']}", "vswitchName": v["vswitchName"],
                                   "zoneId": v["zoneId"]} for v in found]}
        if args.token == "alicloud:ecs/getImages:getImages":
            return {"ids": list(self.images),
                    "images": [{"id": i, "imageId": i, "name": f"{args.args.get('imageFamily')}-{i}"}
                               for i in self.images]}
        return {}


class RecordingMonitor(MockMonitor):
    def __init__(self, mocks: RecordingMocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def RegisterResource(self, request):
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.registrations.append(Registration(
                type=request.type, name=request.name, urn=response.urn, parent=request.parent,
                custom=bool(request.custom), protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete), provider=request.provider,
                dependencies=list(request.dependencies), ignore_changes=list(request.ignoreChanges),
                inputs=rpc.deserialize_properties(request.object),
                delete_before_replace=bool(request.deleteBeforeReplace)))
        return response


@dataclass
class Engine:
    mocks: RecordingMocks
    monitor: RecordingMonitor
    result: Any = None

    def run(self, program: Callable[[], Any]) -> Any:
        holder: dict[str, Any] = {}

        @pulumi.runtime.test
        def _run():
            holder["result"] = program()

        _run()
        self.result = holder.get("result")
        return self.result

    def declare(self, plan, **kwargs) -> Any:
        """Declare the whole TrainingStack for ``plan`` (explicit provider, no exports)."""
        from components.program import build

        return self.run(lambda: build(plan, export=False, **kwargs)[0])

    def value(self, output: Any) -> Any:
        """The resolved value of an Output created during ``run`` (plain values pass through)."""
        if isinstance(output, list):
            return [self.value(o) for o in output]
        if isinstance(output, dict):
            return {k: self.value(v) for k, v in output.items()}
        if not isinstance(output, pulumi.Output):
            return output
        return _sync_await(output.future())

    # ---- queries ------------------------------------------------------------------------
    @property
    def resources(self) -> list[Registration]:
        return self.monitor.registrations

    def of_type(self, token_suffix: str) -> list[Registration]:
        """Registrations whose type token ends with e.g. ``ecs/instance:Instance``; ``kind:K``: trainstack's
        dynamic resources of kind K (``kind:ess-scaling-configuration``)."""
        if token_suffix.startswith("kind:"):
            return [r for r in self.resources if r.type == "pulumi-python:dynamic:Resource"
                    and r.inputs.get("kind") == token_suffix[5:]]
        return [r for r in self.resources if r.type.endswith(token_suffix)]

    def one(self, token_suffix: str) -> Registration:
        found = self.of_type(token_suffix)
        assert len(found) == 1, f"expected one {token_suffix}, got {[r.name for r in found]}"
        return found[0]

    def by_urn(self, urn: str) -> Registration:
        return next(r for r in self.resources if r.urn == urn)

    def type_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.resources:
            counts[r.type] = counts.get(r.type, 0) + 1
        return counts

    def invokes(self, token: str) -> list[dict]:
        return [a for t, a in self.mocks.calls if t == token]


def make_engine(**mock_kwargs) -> Engine:
    mocks = RecordingMocks(**mock_kwargs)
    monitor = RecordingMonitor(mocks)
    pulumi.runtime.set_all_config({})
    pulumi.runtime.set_mocks(mocks, project="trainstack", stack="test", preview=False, monitor=monitor)
    return Engine(mocks=mocks, monitor=monitor)


@pytest.fixture
def engine() -> Engine:
    eng = make_engine()
    yield eng
    pulumi.runtime.set_all_config({})


@pytest.fixture
def engine_factory():
    """For tests that need other invoke answers (no zone, no image, ...)."""
    yield make_engine
    pulumi.runtime.set_all_config({})


class FakeDlcTraining(pulumi.ComponentResource):
    """Stands in for components.dlc.DlcTraining (another engineer's) with its constructor."""

    instances = []  # type: list

    def __init__(self, name, *, plan, vpc_id, vswitch_id, security_group_id, opts=None):
        super().__init__("trainstack:test:FakeDlcTraining", name, None, opts)
        self.plan, self.vpc_id, self.vswitch_id, self.security_group_id = plan, vpc_id, vswitch_id, security_group_id
        FakeDlcTraining.instances.append(self)
        self.register_outputs({})


@pytest.fixture
def fake_dlc(monkeypatch):
    """TrainingStack imports ``components.dlc`` only for DLC plans; tests use this stand-in."""
    module = types.ModuleType("components.dlc")
    module.DlcTraining = FakeDlcTraining  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "components.dlc", module)
    FakeDlcTraining.instances = []
    yield FakeDlcTraining
