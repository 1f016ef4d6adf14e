"""The Automation API adapter (trainstack/commands/up_automation.py) against a stand-in for ``pulumi.automation``:
the calls it makes, and what it reads back from the engine's event stream (real event classes, parsed from the
JSON the CLI writes to its event log)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from pulumi.automation import ConfigValue, Deployment, EngineEvent, errors as auto_errors

from trainstack.commands.up_automation import AutomationDeployer, state_resources
from trainstack.commands.up_failover import capacity_failure
from trainstack.errors import CloudApiError, InputError

ROOT = Path(__file__).resolve().parents[2]
STACK = "urn:pulumi:dev::trainstack::trainstack:index:TrainingStack$trainstack:index:Cluster"
NODE_URN = f"{STACK}$alicloud:ecs/instance:Instance::job-cluster-node-0"
CPFS_URN = "urn:pulumi:dev::trainstack::trainstack:index:Storage$alicloud:nas/fileSystem:FileSystem::job-storage-cpfs"
NO_STOCK = "RunInstances Failed!!! SDKError:\n   StatusCode: 403\n   Code: OperationDenied.NoStock\n   Message: sold out"

DEPLOYMENT = {"resources": [
    {"urn": "urn:pulumi:dev::trainstack::pulumi:pulumi:Stack::trainstack-dev", "type": "pulumi:pulumi:Stack",
     "custom": False},
    {"urn": "urn:pulumi:dev::trainstack::pulumi:providers:alicloud::p", "type": "pulumi:providers:alicloud",
     "custom": True},
    {"urn": CPFS_URN, "type": "alicloud:nas/fileSystem:FileSystem", "custom": True, "protect": True,
     "retainOnDelete": True, "inputs": {"zoneId": "cn-shenzhen-e"}, "outputs": {"zoneId": "cn-shenzhen-e"},
     "parent": "urn:pulumi:dev::trainstack::trainstack:index:Storage::job-storage"},
    {"urn": NODE_URN, "type": "alicloud:ecs/instance:Instance", "custom": True,
     "outputs": {"availabilityZone": "cn-shenzhen-e", "instanceType": "ecs.x"}, "dependencies": [CPFS_URN]},
    {"urn": "urn:r", "type": "alicloud:ecs/capacityReservation:CapacityReservation", "custom": True,
     "inputs": {"zoneIds": ["cn-shenzhen-f"]}},
]}


def event(**body) -> EngineEvent:
    return EngineEvent.from_json({"sequence": 1, "timestamp": 0, **body})


class FakeAutoStack:
    def __init__(self, events=(), fail: str = ""):
        self.events, self.fail = list(events), fail
        self.config = {"trainstack:profile": ConfigValue("profiles/x.yaml"),
                       "alicloud:secretKey": ConfigValue("s3cr3t", secret=True)}
        self.calls: list[tuple] = []
        self.exported = Deployment(version=3, deployment={"resources": [dict(r) for r in DEPLOYMENT["resources"]]})

    def get_all_config(self):
        return dict(self.config)

    def set_config(self, key, value):
        self.calls.append(("set_config", key, value.value))
        self.config[key] = value

    def remove_config(self, key):
        self.calls.append(("remove_config", key))
        self.config.pop(key)

    def history(self, show_secrets=True):
        return [SimpleNamespace(kind="update", result="failed"), SimpleNamespace(kind="preview", result="succeeded")]

    def export_stack(self):
        return self.exported

    def import_stack(self, state):
        self.calls.append(("import_stack", state))

    def _op(self, name, **kw):
        self.calls.append((name, kw))
        for e in self.events:
            kw["on_event"](e)
        if kw.get("on_output"):
            kw["on_output"]("Updating (dev)\n")
        if self.fail:
            raise auto_errors.CommandError(SimpleNamespace(stdout="", stderr=self.fail, code=255))

    def preview(self, **kw):
        self._op("preview", **kw)

    def up(self, **kw):
        self._op("up", **kw)

    def destroy(self, **kw):
        self._op("destroy", **kw)


def auto_with(stack=None, select_error=None):
    def select_stack(stack_name, work_dir):
        if select_error is not None:
            raise select_error
        return stack

    return SimpleNamespace(select_stack=select_stack, errors=auto_errors, ConfigValue=ConfigValue)


def deployer(stack, **kw) -> AutomationDeployer:
    return AutomationDeployer("dev", ROOT, auto=auto_with(stack), echo=lambda line: None, **kw)


def test_state_resources_read_zones_protection_and_dependencies():
    rows = {r.urn: r for r in state_resources(DEPLOYMENT)}
    assert set(rows) == {CPFS_URN, NODE_URN, "urn:r"}  # the stack and the provider are not resources to move
    assert rows[CPFS_URN].zone == "cn-shenzhen-e" and rows[CPFS_URN].protect and rows[CPFS_URN].retain
    assert rows[CPFS_URN].depends_on == ("urn:pulumi:dev::trainstack::trainstack:index:Storage::job-storage",)
    assert rows[NODE_URN].zone == "cn-shenzhen-e" and rows[NODE_URN].outputs["instanceType"] == "ecs.x"
    assert rows["urn:r"].zone == "cn-shenzhen-f"


def test_config_never_reads_secrets_back_and_sets_and_removes_keys():
    stack = FakeAutoStack()
    d = deployer(stack)
    assert d.config() == {"trainstack:profile": "profiles/x.yaml"}
    d.set_config("trainstack:zone", "cn-shenzhen-f")
    d.set_config("trainstack:zone", None)
    d.set_config("trainstack:instanceType", None)  # not set: nothing to remove
    assert stack.calls == [("set_config", "trainstack:zone", "cn-shenzhen-f"), ("remove_config", "trainstack:zone")]
    assert d.succeeded_before() is False


def test_preview_and_up_run_the_policy_pack_and_collect_steps_verdicts_and_diagnostics(tmp_path):
    config = tmp_path / "policy.json"
    config.write_text("{}")
    stack = FakeAutoStack(events=[
        event(resourcePreEvent={"metadata": {"op": "create", "urn": NODE_URN, "type": "alicloud:ecs/instance:Instance",
                                             "provider": ""}}),
        event(policyEvent={"message": "over budget", "policyName": "cost-hourly-budget",
                           "enforcementLevel": "mandatory", "resourceUrn": NODE_URN}),
        event(diagnosticEvent={"message": NO_STOCK, "severity": "error", "urn": NODE_URN}),
        event(diagnosticEvent={"message": "just info", "severity": "info", "urn": NODE_URN}),
    ], fail="error: update failed")
    lines: list[str] = []
    d = AutomationDeployer("dev", ROOT, auto=auto_with(stack), echo=lines.append, policy_config=config)
    preview = d.preview()
    assert not preview.ok and "update failed" in preview.error
    assert preview.steps == (("create", NODE_URN, "alicloud:ecs/instance:Instance"),)
    assert [(v.policy, v.level, v.urn) for v in preview.verdicts] == [("cost-hourly-budget", "mandatory", NODE_URN)]
    name, kw = stack.calls[0]
    assert name == "preview" and kw["policy_packs"] == [str(ROOT / "policies")]
    assert kw["policy_pack_configs"] == [str(config)]
    result = d.up()
    assert [(x.type, x.urn) for x in result.diagnostics] == [("alicloud:ecs/instance:Instance", NODE_URN)]
    assert capacity_failure(result)[0] == "OperationDenied.NoStock"
    assert any("Updating (dev)" in line for line in lines)


def test_destroy_targets_with_dependents_and_protection_is_released_in_the_state():
    stack = FakeAutoStack()
    d = deployer(stack)
    assert d.destroy([CPFS_URN]).ok
    name, kw = stack.calls[-1]
    assert name == "destroy" and kw["target"] == [CPFS_URN] and kw["target_dependents"] is True
    d.release_protection([CPFS_URN])
    (imported,) = [c[1] for c in stack.calls if c[0] == "import_stack"]
    cpfs = next(r for r in imported.deployment["resources"] if r["urn"] == CPFS_URN)
    assert cpfs["protect"] is False and "retainOnDelete" not in cpfs
    node = next(r for r in imported.deployment["resources"] if r["urn"] == NODE_URN)
    assert node.get("protect") is None  # nothing else edited


def test_a_stack_missing_in_the_backend_is_exit_2_with_how_to_create_it():
    with pytest.raises(InputError) as err:
        AutomationDeployer("dev", ROOT, auto=auto_with(select_error=auto_errors.StackNotFoundError(
            SimpleNamespace(stdout="", stderr="no stack named 'dev' found", code=255))))
    assert err.value.exit_code == 2 and "pulumi stack init dev" in err.value.hint


@pytest.mark.parametrize("error", [FileNotFoundError("pulumi"), auto_errors.CommandError(
    SimpleNamespace(stdout="", stderr="error: PULUMI_ACCESS_TOKEN must be set for login", code=255))])
def test_no_cli_or_no_login_is_exit_5_with_what_to_install(error):
    with pytest.raises(CloudApiError) as err:
        AutomationDeployer("dev", ROOT, auto=auto_with(select_error=error))
    assert err.value.exit_code == 5 and "pulumi login" in err.value.hint
