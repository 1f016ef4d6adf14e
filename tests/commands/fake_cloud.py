"""A fake ECS and a fake Pulumi stack for `trainstack up` tests, on the production paths.

:class:`FakeStack` is a :class:`trainstack.commands.up_failover.Deployer`: its ``preview`` and ``up``
run the real program (``__main__.py``) under the recording engine of `trainstack plan`, with the
stack config as it is now, and compare what it declares with its state, like Pulumi does: create,
same, replace (a zonal resource in another zone) and delete. ``up`` then applies that, except that
RunInstances fails for the (type, zone) pairs the test names (a node's create fails with
``OperationDenied.NoStock``, as the provider reports it) and what depends on such a node is not
created; a vSwitch "replaced" into another zone fails like the real CIDR clash, a protected resource
is never deleted. Stock (DescribeAvailableResource) comes from the SDK-shaped fake of
test_preflight, through the real :class:`trainstack.cloud.stock.StockTable`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from test_preflight import FakeStock

from trainstack.cloud.stock import StockTable
from trainstack.commands.up_failover import Diagnostic, RunResult, StateResource, Verdict, dependents
from trainstack.preview.cloud import OfflineCloud
from trainstack.preview.engine import record_program

ROOT = Path(__file__).resolve().parents[2]
INSTANCE = "alicloud:ecs/instance:Instance"
SWITCH = "alicloud:vpc/switch:Switch"
ZONAL = {SWITCH, "alicloud:ecs/ecsDisk:EcsDisk", "alicloud:nas/fileSystem:FileSystem", INSTANCE,
         "alicloud:ecs/capacityReservation:CapacityReservation"}
NO_STOCK = ("[ERROR] terraform-provider-alicloud/alicloud/resource_alicloud_instance.go:1254: Resource alicloud_instance "
            "RunInstances Failed!!! [SDK alibaba-cloud-sdk-go ERROR]:\nSDKError:\n   StatusCode: 403\n"
            "   Code: OperationDenied.NoStock\n   Message: code: 403, The requested resource is sold out in the "
            "specified zone; try other types of resources or other regions and zones.")


def stock_table(on_demand: dict, spot: Optional[dict] = None, region: str = "cn-shenzhen") -> StockTable:
    """The real stock table over a fake DescribeAvailableResource: ``{type: {zone: StatusCategory}}``."""
    return StockTable(FakeStock(on_demand, spot), region)


class ProgramCloud(OfflineCloud):
    """The offline cloud, plus this stack's vSwitches (getSwitches) and the fake's stock (getInstanceTypes)."""

    def __init__(self, region: str, stack: "FakeStack"):
        super().__init__(region)
        self.stack = stack

    def _switches(self, args: dict) -> dict:
        found = [r for r in self.stack.state.values() if r.type == SWITCH]
        return {"id": self.region, "ids": [r.urn for r in found], "vswitches": [
            {"id": r.urn, "vswitchName": r.outputs.get("vswitchName"), "zoneId": r.zone} for r in found]}

    def _instance_types(self, args: dict) -> dict:
        itype = args.get("instanceType")
        spot = (args.get("spotStrategy") or "NoSpot") != "NoSpot"
        zones = self.stack.stock.zones_with_stock(itype, spot)
        return {"id": self.region, "ids": [itype], "instanceTypes": [{"id": itype, "availabilityZones": zones}]}


def _zone(inputs: dict) -> Optional[str]:
    if isinstance(inputs.get("zoneId"), str):
        return inputs["zoneId"]
    if isinstance(inputs.get("zoneIds"), list) and inputs["zoneIds"]:
        return inputs["zoneIds"][0]
    tags = inputs.get("tags") if isinstance(inputs.get("tags"), dict) else {}
    return tags.get("trainstack:zone")


class FakeStack:
    """One Pulumi stack of this project: its config, state and history, driven like the Automation API."""

    def __init__(self, config: dict[str, str], stock: StockTable, *, run_fails: set = frozenset(),
                 verdicts: tuple[Verdict, ...] = (), region: str = "cn-shenzhen", other_failure: str = "",
                 capacity: Optional[dict] = None):
        self.cfg = dict(config)
        #: (type, zone) -> how many nodes RunInstances can still create there (the rest fail: no stock)
        self.capacity = dict(capacity or {})
        self.stock, self.run_fails, self.verdicts, self.region = stock, set(run_fails), verdicts, region
        self.other_failure = other_failure
        self.state: dict[str, StateResource] = {}
        #: what a destroy only forgot (retained): left in the cloud, billing
        self.left_in_cloud: list[StateResource] = []
        self.succeeded = False
        self.calls: list[tuple] = []

    # ---- Deployer --------------------------------------------------------------------------------
    def config(self) -> dict[str, str]:
        return dict(self.cfg)

    def set_config(self, key: str, value: Optional[str]) -> None:
        self.calls.append(("set_config", key, value))
        if value is None:
            self.cfg.pop(key, None)
        else:
            self.cfg[key] = value

    def succeeded_before(self) -> bool:
        return self.succeeded

    def resources(self) -> list[StateResource]:
        return list(self.state.values())

    def preview(self) -> RunResult:
        self.calls.append(("preview", self.cfg.get("trainstack:zone"), self.cfg.get("trainstack:instanceType")))
        declared = self._declared()
        return RunResult(ok=not any(v.level == "mandatory" for v in self.verdicts), steps=tuple(
            (self._op(r), r.urn, r.type) for r in declared.values()) + tuple(
            ("delete", urn, r.type) for urn, r in self.state.items() if urn not in declared), verdicts=self.verdicts)

    def up(self) -> RunResult:
        self.calls.append(("up", self.cfg.get("trainstack:zone"), self.cfg.get("trainstack:instanceType")))
        declared = self._declared()
        if self.other_failure:
            node = next(r for r in declared.values() if r.type == INSTANCE)
            return RunResult(ok=False, diagnostics=(Diagnostic(node.urn, INSTANCE, self.other_failure),),
                             error="update failed")
        errors: list[Diagnostic] = []
        failed: set[str] = set()
        for urn, r in declared.items():
            old = self.state.get(urn)
            if r.type == SWITCH and old is not None and old.zone != r.zone:
                errors.append(Diagnostic(urn, r.type, "Code: InvalidCidrBlock.Overlapped"))
                failed.add(urn)
            elif old is not None and old.protect and old.zone != r.zone:
                errors.append(Diagnostic(urn, r.type, "unable to replace protected resource"))
                failed.add(urn)
            elif r.type == INSTANCE and old is None and self._sold_out(r.outputs["instanceType"], r.zone):
                errors.append(Diagnostic(urn, r.type, NO_STOCK))
                failed.add(urn)
        skipped = {d.urn for d in dependents(sorted(failed), list(declared.values()))}
        for urn, r in declared.items():
            if urn not in skipped:
                self.state[urn] = r
        if not errors:
            for urn in [u for u in self.state if u not in declared]:
                del self.state[urn]
            self.succeeded = True
        return RunResult(ok=not errors, diagnostics=tuple(errors), error="update failed" if errors else "")

    def destroy(self, urns) -> RunResult:
        self.calls.append(("destroy", tuple(sorted(urns))))
        gone = dependents(list(urns), list(self.state.values()))
        if any(r.protect for r in gone):
            return RunResult(ok=False, error="resource is protected; run `pulumi state unprotect` first")
        for r in gone:
            del self.state[r.urn]
            if r.retain:
                self.left_in_cloud.append(r)
        return RunResult(ok=True)

    def release_protection(self, urns) -> None:
        self.calls.append(("release_protection", tuple(sorted(urns))))
        for urn in urns:
            r = self.state[urn]
            self.state[urn] = StateResource(urn=r.urn, type=r.type, zone=r.zone, protect=False, outputs=r.outputs,
                                            depends_on=r.depends_on, retain=False)

    def _sold_out(self, instance_type: str, zone: Optional[str]) -> bool:
        if (instance_type, zone) in self.run_fails:
            return True
        left = self.capacity.get((instance_type, zone))
        if left is None:
            return False
        self.capacity[(instance_type, zone)] = left - 1
        return left <= 0

    # ---- what the program declares now ----------------------------------------------------------
    def _declared(self) -> dict[str, StateResource]:
        config = {k: v for k, v in self.cfg.items()}
        rec = record_program(ROOT, "trainstack", "test", config, cloud=ProgramCloud(self.region, self))
        out = {}
        for r in rec.resources:
            if not r.custom or r.type.startswith("pulumi:providers:"):
                continue
            deps = tuple(r.dependencies) + ((r.parent_urn,) if r.parent_urn else ())
            out[r.urn] = StateResource(urn=r.urn, type=r.type, zone=_zone(r.inputs), protect=r.protect,
                                       outputs=dict(r.inputs), depends_on=deps, retain=r.retain_on_delete)
        return out

    def _op(self, r: StateResource) -> str:
        old = self.state.get(r.urn)
        if old is None:
            return "create"
        return "replace" if r.type in ZONAL and old.zone != r.zone else "same"

    # ---- what a test reads ----------------------------------------------------------------------
    def nodes(self) -> list[StateResource]:
        return [r for r in self.state.values() if r.type == INSTANCE]

    def zones(self) -> set[str]:
        return {r.zone for r in self.state.values() if r.type in ZONAL and r.zone}

    def ups(self) -> list[tuple]:
        return [c[1:] for c in self.calls if c[0] == "up"]


class FakeWitness:
    def __init__(self, heartbeat: Optional[bool] = False, running: tuple[str, ...] = ()):
        self.heartbeat, self.running = heartbeat, list(running)
        self.asked: list[tuple[str, str]] = []

    def job_started(self, bucket: str, prefix: str) -> Optional[bool]:
        self.asked.append((bucket, prefix))
        return self.heartbeat

    def running_nodes(self, plan) -> list[str]:
        return list(self.running)
