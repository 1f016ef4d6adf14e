"""The one place `trainstack up` calls Pulumi's Automation API (``pulumi.automation``, run with the user's CLI).

:class:`AutomationDeployer` is the :class:`~trainstack.commands.up_failover.Deployer` the loop
drives: it selects the stack of this project (``work_dir`` holds ``Pulumi.yaml``; the stack files
live in ``stacks/``), sets and removes ``trainstack:`` config keys, reads the stack's history and
state (``export_stack``), previews and updates with the policy pack (``--policy-pack policies``,
``--policy-pack-config`` when given: the pack runs again on every attempt), destroys given URNs with
their dependents, and turns protection off for given URNs (the edit ``pulumi state unprotect``
makes, as a state export and import). Engine events (``on_event``) carry each error diagnostic with
the URN it belongs to, which is how a stock failure of a node is told from any other failure.

The Automation API raises ``CommandError`` for a failed command; a missing CLI or backend login is
exit 5 with what to install or log in to. Nothing here prints secrets: config values marked secret
are never read back (``config`` reads the stack file, as `trainstack plan --stack` does).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence

from ..errors import CloudApiError, InputError
from ..lazy import LazyModule
from .up_failover import Diagnostic, RunResult, StateResource, Verdict

#: the Automation API: only `trainstack up` deploys, and every command module is imported at start
if TYPE_CHECKING:
    from pulumi import automation
else:
    automation = LazyModule("pulumi.automation")

#: the Pulumi CLI the pinned SDK speaks (requirements.txt pins pulumi 3.272.x)
CLI_HINT = ("install the Pulumi CLI (https://www.pulumi.com/docs/install/) and log in to the stack's backend "
            "(`pulumi login`), then retry")
TAIL = 1500


def _zone_of(state: dict) -> Optional[str]:
    """The zone a resource's outputs (else inputs) name: zoneId, availabilityZone or zoneIds[0]."""
    for part in (state.get("outputs") or {}, state.get("inputs") or {}):
        for key in ("zoneId", "availabilityZone"):
            if isinstance(part.get(key), str) and part[key]:
                return part[key]
        ids = part.get("zoneIds")
        if isinstance(ids, list) and ids and isinstance(ids[0], str):
            return ids[0]
    return None


def state_resources(deployment: dict) -> list[StateResource]:
    """The custom resources of an exported deployment (``export_stack().deployment``)."""
    out = []
    for r in deployment.get("resources") or []:
        if not r.get("custom") or str(r.get("type", "")).startswith("pulumi:providers:"):
            continue
        deps = tuple(r.get("dependencies") or ()) + ((r["parent"],) if r.get("parent") else ())
        out.append(StateResource(urn=r["urn"], type=r["type"], zone=_zone_of(r), protect=bool(r.get("protect")),
                                 outputs=dict(r.get("outputs") or {}), depends_on=deps,
                                 retain=bool(r.get("retainOnDelete"))))
    return out


class Events:
    """Collects what the loop needs from the engine's event stream."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str, str]] = []
        self.diagnostics: list[Diagnostic] = []
        self.verdicts: list[Verdict] = []

    def __call__(self, event: Any) -> None:
        pre = getattr(event, "resource_pre_event", None)
        if pre is not None and pre.metadata is not None:
            m = pre.metadata
            self.steps.append((str(getattr(m.op, "value", m.op)), m.urn, m.type))
        diag = getattr(event, "diagnostic_event", None)
        if diag is not None and diag.severity == "error":
            kind = diag.urn.split("::")[-2].rsplit("$", 1)[-1] if diag.urn and diag.urn.count("::") >= 3 else None
            self.diagnostics.append(Diagnostic(urn=diag.urn, type=kind, message=diag.message))
        pol = getattr(event, "policy_event", None)
        if pol is not None:
            self.verdicts.append(Verdict(policy=pol.policy_name, level=pol.enforcement_level, urn=pol.resource_urn,
                                         message=pol.message))

    def result(self, ok: bool, error: str = "") -> RunResult:
        return RunResult(ok=ok, steps=tuple(self.steps), diagnostics=tuple(self.diagnostics),
                         verdicts=tuple(self.verdicts), error=error)


class AutomationDeployer:
    """A stack of this project through ``pulumi.automation`` (``LocalWorkspace``, the user's CLI)."""

    def __init__(self, stack: str, work_dir: Path, *, policy_pack: Optional[Path] = None,
                 policy_config: Optional[Path] = None, echo: Callable[[str], None] = print,
                 read_config: Optional[Callable[[], dict[str, str]]] = None, auto: Any = None):
        self.stack_name, self.work_dir, self.echo = stack, Path(work_dir), echo
        self.policy_pack = policy_pack or self.work_dir / "policies"
        self.policy_config, self._read_config = policy_config, read_config
        self.auto = auto or _automation()
        try:
            self.stack = self.auto.select_stack(stack_name=stack, work_dir=str(self.work_dir))
        except self.auto.errors.StackNotFoundError:
            raise InputError(f"stack {stack} does not exist in the Pulumi backend",
                             hint=f"create it once with `pulumi stack init {stack}` (its config stays in "
                                  f"stacks/Pulumi.{stack}.yaml)") from None
        except (FileNotFoundError, self.auto.errors.CommandError) as exc:
            raise CloudApiError(f"cannot select stack {stack} with the Pulumi CLI: {_tail(exc)}", hint=CLI_HINT) from None

    # ---- config, history, state ------------------------------------------------------------------
    def config(self) -> dict[str, str]:
        if self._read_config is not None:
            return dict(self._read_config())
        return {k: v.value for k, v in self.stack.get_all_config().items() if not v.secret}

    def set_config(self, key: str, value: Optional[str]) -> None:
        if value is None:
            if key in self.config():
                self.stack.remove_config(key)
        else:
            self.stack.set_config(key, self.auto.ConfigValue(value=value))

    def succeeded_before(self) -> bool:
        return any(h.kind == "update" and h.result == "succeeded" for h in self.stack.history(show_secrets=False))

    def resources(self) -> list[StateResource]:
        return state_resources(self.stack.export_stack().deployment or {})

    # ---- operations --------------------------------------------------------------------------------
    def _policy_args(self) -> dict:
        args: dict = {"policy_packs": [str(self.policy_pack)]}
        if self.policy_config is not None:
            args["policy_pack_configs"] = [str(self.policy_config)]
        return args

    def _run(self, what: str, call: Callable[[Events], Any]) -> RunResult:
        events = Events()
        try:
            call(events)
        except self.auto.errors.CommandError as exc:
            return events.result(False, _tail(exc))
        except FileNotFoundError as exc:
            raise CloudApiError(f"{what}: the Pulumi CLI is not installed: {exc}", hint=CLI_HINT) from None
        return events.result(True)

    def preview(self) -> RunResult:
        return self._run("pulumi preview", lambda ev: self.stack.preview(on_event=ev, **self._policy_args()))

    def up(self) -> RunResult:
        return self._run("pulumi up", lambda ev: self.stack.up(on_event=ev, on_output=self._line,
                                                               **self._policy_args()))

    def destroy(self, urns: Sequence[str]) -> RunResult:
        return self._run("pulumi destroy", lambda ev: self.stack.destroy(
            target=list(urns), target_dependents=True, on_event=ev, on_output=self._line))

    def release_protection(self, urns: Sequence[str]) -> None:
        """``protect`` and ``retainOnDelete`` off for ``urns`` (an export, the edit, an import)."""
        wanted = set(urns)
        exported = self.stack.export_stack()
        for r in (exported.deployment or {}).get("resources") or []:
            if r.get("urn") in wanted:
                r["protect"] = False
                r.pop("retainOnDelete", None)
        self.stack.import_stack(exported)

    def _line(self, text: str) -> None:
        self.echo(f"    | {text.rstrip()}")


def _automation() -> Any:
    return automation


def _tail(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= TAIL else "..." + text[-TAIL:]
