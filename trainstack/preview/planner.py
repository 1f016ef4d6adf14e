"""`trainstack plan` without the CLI: source -> Plan -> recorded program run -> policies -> document.

The document (``schema_version`` 2, see docs/preview.md) is the one thing renderers, ``diff`` and CI
read, so a plan saved on the base branch can be compared with one computed on the PR branch.
The Plan is resolved here as well as inside the program: an infeasible profile stops with exit 3
and its suggestions before Pulumi runs, and the full Plan (not only the exported summary) goes
into the document.
"""

from __future__ import annotations

import contextlib
import re
import sys
from pathlib import Path
from typing import Any, Callable, Optional

from ..dlc_job import KIND as DLC_KIND
from ..errors import InputError, TrainstackError
from ..plan import Plan
from ..rules import reusing_plans
from ..rules.policy_config import load_policy_config
from ..stack_config import plan_for_config, policy_config_path, trusted_profile
from .cloud import FAKE_IMAGE_ID, OfflineCloud
from .engine import RecordedResource, Recording, record_program
from .sources import PLAN_SCHEMA_VERSION, Project, Source, stack_config
from .values import public, reveal, shorten

#: ``run_policies(resources, config) -> verdicts`` (policies/runner.py)
PolicyRunner = Callable[[list, Optional[dict]], list]


def plan_source(source: Source, project: Project, *, policy_runner: Optional[PolicyRunner] = None,
                policy_config: Optional[dict] = None) -> dict[str, Any]:
    """The plan document for a profile or stack source (exit-coded errors as TrainstackError).
    ``policy_config`` None: a stack's own ``trainstack:policyConfig`` (if any) applies; a loaded file
    (``--policy-config FILE``) replaces it for the verdicts and, as ``trainstack:policyConfig``, for the
    resolver and the recorded program alike (its PCIe exception plans the same type everywhere)."""
    _on_path(project.root)
    if source.kind == "stack":
        config, secret_keys = stack_config(project, source.stack or "")
        stack = source.stack or ""
        if policy_config is None:
            policy_config = load_policy_config(policy_config_path(config, project.name, project.root))
    elif source.kind == "profile":
        config = dict(project.defaults, **{f"{project.name}:profile": str(source.path.resolve())})
        secret_keys, stack = (), ""
    else:
        raise InputError(f"{source.label} is a saved plan; `plan` needs a profile or a stack")
    policy_file = getattr(policy_config, "path", None)
    if policy_file is not None:
        config = dict(config, **{f"{project.name}:policyConfig": str(Path(policy_file).resolve())})
    with contextlib.ExitStack() as trust:
        # files named on the command line may live anywhere; stack config stays confined to stacks/
        if source.kind == "profile":
            trust.enter_context(trusted_profile(source.path))
        if policy_file is not None:
            trust.enter_context(trusted_profile(Path(policy_file)))
        trust.enter_context(reusing_plans())
        plan = resolve_config(config, project, secret_keys)
        profile = config_profile(config, project)
        stack = stack or plan.name
        recording = run_program(project, stack, config, secret_keys, plan)
    resources = policy_resources(recording, config)
    runner = policy_runner or default_policy_runner()
    try:
        raw = runner(resources, policy_config)
    except ValueError as exc:  # the runner's word for a bad policy config
        if policy_config is None:
            raise
        raise InputError(str(exc), hint="policy config format: docs/policies.md") from None
    verdicts = sorted((_verdict(v) for v in raw),
                      key=lambda v: (v["level"] != "mandatory", v["policy"], v["resource"] or "", v["message"]))
    return build_document(source, project, stack, plan, recording, verdicts, profile=profile)


def resolve_config(config: dict[str, str], project: Project, secret_keys: tuple[str, ...] = ()) -> Plan:
    """The Plan the program will build for this config (same profile path rules and overrides)."""
    return plan_for_config(config, project.name, project.root, secret_keys)


def config_profile(config: dict[str, str], project: Project):
    """The profile the program reads for this config (stack overrides applied). Call it after
    :func:`resolve_config`, which reports a bad config or profile first."""
    from trainstack.stack_config import load_profile_with_overrides, profile_path

    path = profile_path(config[f"{project.name}:profile"], project.root)
    return load_profile_with_overrides(path, zone=config.get(f"{project.name}:zone"),
                                       price_book=config.get(f"{project.name}:priceBook"), root=project.root,
                                       instance_type=config.get(f"{project.name}:instanceType"))


def run_program(project: Project, stack: str, config: dict[str, str], secret_keys: tuple[str, ...],
                plan: Plan) -> Recording:
    """Record the real program; a TrainstackError raised inside it surfaces unchanged."""
    cloud = OfflineCloud(plan.region, zones=[plan.zone] if plan.zone else None)
    try:
        return record_program(project.program, project.name, stack, config, cloud=cloud, secret_keys=secret_keys)
    except Exception as exc:
        original = _trainstack_error(exc)
        if original is not None:
            raise original from None
        from pulumi.errors import RunError

        if isinstance(exc, RunError):  # e.g. a required config key is missing
            raise InputError(f"the Pulumi program stopped: {exc}") from None
        raise


def _trainstack_error(exc: BaseException) -> Optional[TrainstackError]:
    """The TrainstackError behind ``exc`` (``__main__`` re-raises it as ``pulumi.RunError ... from
    None``, which still keeps it as ``__context__``)."""
    seen: set[int] = set()
    todo: list[Optional[BaseException]] = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, TrainstackError):
            return e
        todo += [e.__cause__, e.__context__]
    return None


def default_policy_runner() -> PolicyRunner:
    from policies.runner import run_policies

    return run_policies


def policy_resources(recording: Recording, config: dict[str, str]) -> list[dict[str, Any]]:
    """Resources in the shape policies/runner.py takes: real (unredacted) camelCase inputs."""
    by_urn = recording.by_urn()
    default_region = config.get("alicloud:region")
    out = []
    for r in ordered(recording.resources):
        provider = by_urn.get(r.provider_urn or "")
        region = (provider.inputs.get("region") if provider else None) or default_region
        out.append({"type": r.type, "name": r.name, "urn": r.urn, "inputs": reveal(r.inputs),
                    "parent": r.parent_urn, "protect": r.protect, "provider_region": region,
                    "dependencies": list(r.dependencies),
                    "property_dependencies": {k: list(v) for k, v in r.property_dependencies.items()}})
    return out


def ordered(resources: list[RecordedResource]) -> list[RecordedResource]:
    """Parents before children, siblings in natural name order: deterministic whatever order the
    engine's worker threads registered them in."""
    children: dict[Optional[str], list[RecordedResource]] = {}
    urns = {r.urn for r in resources}
    for r in resources:
        children.setdefault(r.parent_urn if r.parent_urn in urns else None, []).append(r)
    out: list[RecordedResource] = []
    stack = sorted(children.get(None, []), key=_sibling_key, reverse=True)
    while stack:
        r = stack.pop()
        out.append(r)
        stack += sorted(children.get(r.urn, []), key=_sibling_key, reverse=True)
    return out


def _sibling_key(r: RecordedResource) -> tuple:
    return (natural_key(r.name), r.type)


def natural_key(text: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", text))


def _verdict(v: dict) -> dict[str, Any]:
    return public({"policy": v.get("policy"), "level": v.get("level"), "resource": v.get("resource"),
                   "message": v.get("message")})


# ---- the document ------------------------------------------------------------------------------

def build_document(source: Source, project: Project, stack: str, plan: Plan, recording: Recording,
                   verdicts: list[dict], profile: Any = None) -> dict[str, Any]:
    resources = ordered(recording.resources)
    names = {r.urn: r.name for r in resources}
    exports = public(recording.exports)
    summary = dict(plan.summary())
    notes = []
    if plan.zone is None and exports.get("zone"):
        summary["zone"] = exports["zone"]
        notes.append(f"zone {exports['zone']} stands in for the deploy-time zone lookup (offline preview)")
    if any(i.token.endswith("getImages:getImages") for i in recording.invokes):
        notes.append(f"image {FAKE_IMAGE_ID} is a placeholder: the real image is looked up by family at deploy time")
    notes += [f"invoke {i.token} has no offline answer (empty result)" for i in recording.invokes if not i.answered]
    return {
        "schema_version": PLAN_SCHEMA_VERSION,
        "kind": "trainstack-plan",
        "source": {"kind": source.kind, "name": source.label, "path": _relative(source.path, project.root)},
        "project": project.name,
        "stack": stack,
        "catalog_date": plan.catalog_date or _catalog_date(),
        "profile": None if profile is None else public(profile.model_dump(mode="json", exclude_unset=True)),
        "summary": summary,
        "prices": None if plan.prices is None else plan.prices.model_dump(mode="json"),
        "cost": cost_block(plan),
        "plan": plan.model_dump(mode="json"),
        "resources": [_resource_entry(r, names) for r in resources],
        "invokes": sorted(({"token": i.token, "args": public(i.args), "answered": i.answered}
                           for i in recording.invokes), key=lambda i: (i["token"], repr(i["args"]))),
        "policy": verdicts,
        "exports": {k: exports[k] for k in sorted(exports)},
        "dlc_request": dlc_request(resources, plan, stack),
        "logs": [{"level": level, "message": public(msg)} for level, msg in recording.logs],
        "notes": notes,
    }


def _resource_entry(r: RecordedResource, names: dict[str, str]) -> dict[str, Any]:
    """One resource: identity, the lifecycle options that decide what `pulumi up` does to it, inputs.

    ``property_dependencies`` (input -> URNs whose outputs it holds, as the engine received them at
    registration) and the offline ``id`` let the diff find the inputs a replaced resource feeds
    (trainstack.preview.propagation); both are optional for readers: older plans lack them."""
    entry: dict[str, Any] = {
        "type": r.type, "name": r.name, "urn": r.urn, "id": r.id,
        "parent": names.get(r.parent_urn or ""), "parent_urn": r.parent_urn,
        "custom": r.custom, "provider_urn": r.provider_urn,
        "protect": r.protect, "retain_on_delete": r.retain_on_delete,
        "ignore_changes": list(r.ignore_changes), "delete_before_replace": r.delete_before_replace,
        "replace_on_changes": list(r.replace_on_changes),
        "inputs": shorten(public(r.inputs)),
        "dependencies": [d for d in r.dependencies if d in names],
        "property_dependencies": {k: [u for u in urns if u in names]
                                  for k, urns in sorted(r.property_dependencies.items())
                                  if any(u in names for u in urns)},
    }
    if r.read:
        entry["read"] = True
    return entry


def cost_block(plan: Plan) -> dict[str, Any]:
    """Chosen, on-demand and spot (estimated) cost; spot hours carry the resolver's restart allowance."""
    from trainstack.placement import SPOT_RESTART_ALLOWANCE

    est = plan.estimate
    hours = plan.estimated_hours
    base_hours = None if hours is None else (hours / SPOT_RESTART_ALLOWANCE if plan.spot else hours)
    spot_hours = None if base_hours is None else base_hours * SPOT_RESTART_ALLOWANCE

    def total(hourly: Optional[float], h: Optional[float]) -> Optional[float]:
        return None if hourly is None or h is None else round(hourly * h, 2)

    # the chosen pricing's total is the resolver's own (unrounded hours); the other is derived
    od_total = plan.total_cost_cny if not plan.spot else total(est.on_demand_hourly_cny, base_hours)
    spot_total = plan.total_cost_cny if plan.spot else total(est.spot_hourly_cny, spot_hours)
    return {
        "pricing": "spot" if plan.spot else "on-demand",
        "hourly_cny": plan.hourly_cost_cny, "total_cny": plan.total_cost_cny, "estimated_hours": hours,
        "on_demand": {"hourly_cny": est.on_demand_hourly_cny, "total_cny": od_total,
                      "estimated_hours": None if base_hours is None else round(base_hours, 3)},
        "spot": {"hourly_cny": est.spot_hourly_cny, "total_cny": spot_total,
                 "estimated_hours": None if spot_hours is None else round(spot_hours, 3),
                 "estimate": plan.prices is None or plan.prices.spot_estimated is not False},
    }


def dlc_request(resources: list[RecordedResource], plan: Plan, stack: str) -> Optional[dict]:
    """The CreateJob body the DLC job resource would send (redacted), from its recorded inputs."""
    job = next((r for r in resources if isinstance(r.inputs, dict) and r.inputs.get("kind") == DLC_KIND), None)
    if job is None:
        return None
    from trainstack.cloud import dlc_request as dlc

    try:
        inputs = reveal(job.inputs)
        body = dlc.build_request_model(inputs, image=dlc.preview_image(inputs)).to_map()
    except (ValueError, KeyError, TypeError):
        body = dlc.preview_request(plan, stack)
    return {"resource": job.name, "body": public(body)}


def _catalog_date() -> Optional[str]:
    from trainstack.catalog import load_catalog

    return load_catalog().newest_price_date


def _relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


def _on_path(root: Path) -> None:
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))


def load_side(arg: str, project: Project, policy_config: Optional[dict] = None) -> dict[str, Any]:
    """A diff side as a plan document: a saved JSON as is, a profile or stack planned now."""
    from .sources import classify, load_saved_plan

    source = classify(arg, project)
    if source.kind == "saved":
        return load_saved_plan(source.path)
    return plan_source(source, project, policy_config=policy_config)
