"""Run the pack's policies offline, the way the Pulumi engine runs them (for ``trainstack plan``).

``run_policies(resources, config)`` takes the resources a (mocked) program registered and returns
one verdict per violation::

    resource = {"type": "alicloud:ecs/instance:Instance", "name": "node-0",
                "urn": "urn:pulumi:...",            # optional; made up from type and name
                "inputs": {...camelCase...},         # as the engine sends them
                "parent": "urn or name" | None, "protect": False,
                "provider_region": "cn-shenzhen" | None,
                # optional, like the engine's: URNs (or names) this resource depends on
                "dependencies": [...], "property_dependencies": {"instanceId": [...]}}
    verdict = {"policy": "no-public-ssh", "level": "mandatory" | "advisory",
               "resource": "ssh-rule" | None, "message": "ssh-rule: ingress rule opens ..."}

Faithful to the engine (pulumi-policy 1.21 ``_PolicyAnalyzerServicer``): inputs travel through a
protobuf ``Struct`` (every number becomes a float), are deserialised and wrapped by
``unknown_checking_proxy``; resource policies run per resource, then stack policies once; a
policy that reads an unknown value gives an advisory "can't run policy" verdict; a policy that
calls ``not_applicable`` gives none. ``resource`` is the resource's name, or ``None`` for a
stack-level verdict (a stack policy that names a resource URN gets that resource's name).

``config`` has the shape of a ``--policy-pack-config`` file: ``{policy: level}`` or
``{policy: {"enforcementLevel": level, **properties}}``, ``level`` one of ``advisory``,
``mandatory``, ``remediate`` (= mandatory), ``disabled``; the key ``all`` sets every level.
Schema defaults fill unset properties, as the Pulumi CLI does. A bad config raises ValueError.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Iterable, Optional

from google.protobuf import json_format, struct_pb2
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.deserialize import deserialize_properties
from pulumi_policy.policy import _NotApplicableError
from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

from trainstack.rules.policy_config import resolve_policy_config

if __package__:
    from .rules import ALL_POLICIES
else:
    from rules import ALL_POLICIES  # type: ignore[no-redef]

_LEVELS = {level.value: level for level in EnforcementLevel}


def engine_props(inputs: Optional[Mapping[str, Any]]) -> Mapping[str, Any]:
    """``inputs`` exactly as a policy sees them: Struct round trip, deserialised, proxied."""
    struct = struct_pb2.Struct()
    struct.update(_jsonable(dict(inputs or {})))
    return unknown_checking_proxy(deserialize_properties(json_format.MessageToDict(struct)))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    return str(value)


def _plain_levels(config: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """A config whose levels may be EnforcementLevel members, with their words instead."""
    def word(v: Any) -> Any:
        return v.value if isinstance(v, EnforcementLevel) else v

    out: dict[str, Any] = {}
    for name, value in (config or {}).items():
        if isinstance(value, Mapping) and "enforcementLevel" in value:
            value = {**value, "enforcementLevel": word(value["enforcementLevel"])}
        out[name] = word(value)
    return out


def resolve_config(config: Optional[Mapping[str, Any]],
                   policies: Iterable[Any] = ALL_POLICIES) -> dict[str, tuple[EnforcementLevel, dict]]:
    """``{policy name: (level, properties)}`` from a policy-pack config (defaults filled in), with the
    rules of trainstack.rules.policy_config (the CLI's loader): a bad config raises ValueError."""
    shapes = [(p.name, (p.enforcement_level or EnforcementLevel.ADVISORY).value,
               p.config_schema.properties if p.config_schema else {}) for p in policies]
    resolved = resolve_policy_config(_plain_levels(config), shapes)
    return {name: (_LEVELS[level], props) for name, (level, props) in resolved.items()}


def _urn(r: Mapping[str, Any]) -> str:
    return r.get("urn") or f"urn:pulumi:offline::trainstack::{r['type']}::{r['name']}"


def _providers(resources: list[dict]) -> dict[str, PolicyProviderResource]:
    """The provider a policy sees, per region the resources name (one object per region)."""
    return {region: PolicyProviderResource("pulumi:providers:alicloud", engine_props({"region": region}),
                                           "urn:pulumi:offline::trainstack::pulumi:providers:alicloud::default",
                                           "default")
            for region in {r.get("provider_region") for r in resources} if region}


def _opts(r: Mapping[str, Any], parent_urn: Optional[str]) -> PolicyResourceOptions:
    return PolicyResourceOptions(bool(r.get("protect")), [], None, [], PolicyCustomTimeouts(0, 0, 0), [],
                                 parent_urn)


def _verdict(policy: Any, level: EnforcementLevel, resource: Optional[str], message: str) -> dict:
    shown = "mandatory" if level in (EnforcementLevel.MANDATORY, EnforcementLevel.REMEDIATE) else level.value
    return {"policy": policy.name, "level": shown, "resource": resource,
            "message": message or policy.description}


def run_policies(resources: list[dict], config: Optional[dict] = None,
                 policies: Optional[Iterable[Any]] = None) -> list[dict]:
    """Every policy verdict for ``resources`` (see the module docstring for both shapes)."""
    policies = list(ALL_POLICIES if policies is None else policies)
    settings = resolve_config(config, policies)
    urns = [_urn(r) for r in resources]
    by_key: dict[str, str] = {}  # urn or name -> urn
    for r, urn in zip(resources, urns):
        by_key[urn] = urn
        by_key.setdefault(r["name"], urn)
    names = {urn: r["name"] for r, urn in zip(resources, urns)}
    parents = [by_key.get(r.get("parent") or "", r.get("parent") or None) for r in resources]
    verdicts: list[dict] = []

    def call(policy: Any, args: Any, level: EnforcementLevel, resource: Optional[str]) -> None:
        def report(message: str, urn: Optional[str] = None) -> None:
            verdicts.append(_verdict(policy, level, names.get(urn or "", resource), message))
        try:
            policy.validate(args, report)  # our policies are synchronous
        except UnknownValueError as exc:
            where = f"{resource}: " if resource else ""
            verdicts.append(_verdict(policy, EnforcementLevel.ADVISORY, resource,
                                     f"{where}can't run policy '{policy.name}' during preview: {exc.message}"))
        except _NotApplicableError:
            pass

    active = [(p, *settings[p.name]) for p in policies if settings[p.name][0] != EnforcementLevel.DISABLED]
    # each resource's props, options and provider are built once: policies only read them
    props = [engine_props(r.get("inputs")) for r in resources]
    providers = _providers(resources)
    for r, urn, parent, p in zip(resources, urns, parents, props):
        opts, provider = _opts(r, parent), providers.get(r.get("provider_region"))
        for policy, level, cfg in active:
            if isinstance(policy, ResourceValidationPolicy):
                args = ResourceValidationArgs(r["type"], p, urn, r["name"], opts, provider, dict(cfg) or None)
                call(policy, args, level, r["name"])

    stack_policies = [(p, level, cfg) for p, level, cfg in active if isinstance(p, StackValidationPolicy)]
    if stack_policies:
        stack = _stack(resources, urns, parents, by_key, props, providers)
        for policy, level, cfg in stack_policies:
            call(policy, StackValidationArgs(stack, dict(cfg) or None), level, None)
    return verdicts


def stack_resources(resources: list[dict]) -> list[PolicyResource]:
    """``resources`` as the ``PolicyResource`` objects a stack policy gets (linked, props wrapped)."""
    urns = [_urn(r) for r in resources]
    by_key: dict[str, str] = {}
    for r, urn in zip(resources, urns):
        by_key[urn] = urn
        by_key.setdefault(r["name"], urn)
    parents = [by_key.get(r.get("parent") or "", r.get("parent") or None) for r in resources]
    props = [engine_props(r.get("inputs")) for r in resources]
    return _stack(resources, urns, parents, by_key, props, _providers(resources))


def _stack(resources: list[dict], urns: list[str], parents: list[Optional[str]], by_key: dict[str, str],
           props: list[Mapping[str, Any]], providers: dict[str, PolicyProviderResource]) -> list[PolicyResource]:
    """``PolicyResource`` objects linked by parent and dependencies, as the engine links them."""
    out = [PolicyResource(r["type"], p, urn, r["name"], _opts(r, parent), providers.get(r.get("provider_region")),
                          None, [], {})
           for r, urn, parent, p in zip(resources, urns, parents, props)]
    by_urn = {p.urn: p for p in out}

    def find(keys: Iterable[str]) -> list[PolicyResource]:
        return [by_urn[by_key[k]] for k in keys or () if k in by_key]

    for r, p, parent in zip(resources, out, parents):
        p.parent = by_urn.get(parent or "")
        p.dependencies = find(r.get("dependencies") or ())
        p.property_dependencies = {k: find(v) for k, v in (r.get("property_dependencies") or {}).items()}
    return out
