"""A stack's config as the Pulumi program reads it: which profile, which overrides, which deadline.

Pure, so ``trainstack validate --stack`` and the offline plan apply exactly the rules the program
applies: ``components/program.py`` reads its config into a mapping and calls :func:`stack_inputs`,
the one pipeline, without this module importing Pulumi.

Stack config (``stacks/Pulumi.<stack>.yaml``):
- ``trainstack:profile`` (required): profile path, relative to ``stacks/`` (an absolute path must
  lie under ``stacks/`` too). It is confined there, symlinks resolved: a stack file in a pull
  request cannot make the program, the offline plan or the CI comment read ``/etc/shadow`` or
  ``../../secrets.yaml``. ``trainstack plan PROFILE`` names its file on the command line instead
  (:func:`trusted_profile`).
- ``trainstack:zone`` (optional): pin the zone (overrides the profile's ``zone``).
- ``trainstack:instanceType`` (optional): deploy this ECS type (``resources.instance_types`` becomes
  just it); `trainstack up` sets it with ``trainstack:zone`` to one row of the plan's fallback order.
- ``trainstack:autoReleaseAt`` (optional): hard deadline, UTC ``YYYY-MM-DDTHH:MM:SSZ``; ECS
  releases the nodes then (checkpoint storage is separate and survives).
- ``trainstack:priceBook`` (optional): the team's price book, relative to ``stacks/`` or absolute;
  replaces the profile's ``price_book`` (docs/prices.md).
- ``trainstack:storageGeneration`` (optional, default 1): part of the stack bucket's name; raise it
  to deploy the stack again next to a bucket an earlier ``pulumi destroy`` retained.
- ``trainstack:policyConfig`` (optional): the stack's policy config (a ``--policy-pack-config`` JSON
  file), relative to ``stacks/`` like the profile and confined there; ``validate``, ``resolve``,
  ``plan``, ``diff`` and the workflows (``pulumi preview/up --policy-pack-config``) read it, and a
  ``--policy-config FILE`` on the command line replaces it (docs/policies.md).
- ``alicloud:region`` (optional): must equal the profile's region if set.
- ``alicloud:accessKey``/``secretKey``/``securityToken`` only as secrets (``pulumi config set
  --secret``); a plain value is refused (docs/provisioning.md, "Before the first deployment").
"""

from __future__ import annotations

import contextlib
import datetime as _dt
from pathlib import Path
from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Mapping, Optional

from .errors import InputError
from .plan import Plan
from .profile import TrainingProfile, parse_profile, read_yaml_document

PROJECT_ROOT = Path(__file__).resolve().parents[1]
STACKS_DIR_NAME = "stacks"
AUTO_RELEASE_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
PLAIN_CREDENTIAL_KEYS = ("alicloud:accessKey", "alicloud:secretKey", "alicloud:securityToken")
#: profile files named on trainstack's own command line (``plan PROFILE``): allowed outside stacks/
_TRUSTED_PROFILES: set[Path] = set()


@contextlib.contextmanager
def trusted_profile(path: Path) -> Iterator[None]:
    """Within the block, ``trainstack:profile`` may name ``path`` although it is outside stacks/:
    the user gave it on the command line (the offline plan of a profile file)."""
    resolved = Path(path).resolve()
    added = resolved not in _TRUSTED_PROFILES
    _TRUSTED_PROFILES.add(resolved)
    try:
        yield
    finally:
        if added:
            _TRUSTED_PROFILES.discard(resolved)


def profile_path(value: str, root: Path = PROJECT_ROOT, key: str = "trainstack:profile",
                 example: str = "profiles/my-run.yaml") -> Path:
    """``trainstack:profile`` (or another file the stack config names, ``key``) as a path under
    ``<root>/stacks`` (relative to it, or absolute inside it).

    Raises InputError for a path that leaves stacks/ (``..``, an absolute path elsewhere, a symlink
    pointing out); the message names the value given, never the file's content."""
    stacks = (Path(root) / STACKS_DIR_NAME).resolve()
    if not isinstance(value, str) or not value.strip() or "\x00" in value:
        raise InputError(f"{key} must be a path relative to stacks/, e.g. {example}")
    p = Path(value)
    candidate = p if p.is_absolute() else stacks / p
    try:
        resolved = candidate.resolve()
    except (OSError, RuntimeError, ValueError):
        raise InputError(f"{key} {value!r} cannot be resolved (a symlink loop?)") from None
    if resolved in _TRUSTED_PROFILES:
        return resolved
    if resolved != stacks and stacks not in resolved.parents:
        raise InputError(f"{key} {value!r} is outside stacks/; stack config may only name "
                         "files under stacks/ (symlinks resolved)",
                         hint=f"move the file under stacks/ and set {key} to a path like {example}")
    return candidate


def load_profile_with_overrides(path: Path, zone: Optional[str] = None, price_book: Optional[str] = None,
                                root: Path = PROJECT_ROOT, instance_type: Optional[str] = None) -> TrainingProfile:
    """Load the profile, applying stack-level overrides before validation (so a wrong zone is
    reported like a wrong profile field). ``price_book`` (``trainstack:priceBook``) is relative to
    ``<root>/stacks`` like the profile path."""
    doc = read_yaml_document(path)
    if zone:
        doc["zone"] = zone
    if instance_type:
        resources = doc.get("resources") if isinstance(doc.get("resources"), dict) else {}
        doc["resources"] = {**resources, "instance_types": [instance_type]}
    if price_book:
        doc["price_book"] = str(profile_path(price_book, root, key="trainstack:priceBook",
                                             example="profiles/prices.yaml"))
    return parse_profile(doc, file=str(path), base_dir=Path(path).resolve().parent)


def check_region(profile: TrainingProfile, configured: Optional[str]) -> None:
    if configured and configured != profile.region:
        raise InputError(
            f"alicloud:region is {configured} but the profile {profile.name} is for {profile.region}",
            hint="remove alicloud:region from the stack config (the profile decides the region) "
                 "or change the profile's region")


def check_auto_release_time(value: Optional[str], now: Optional[_dt.datetime] = None) -> Optional[str]:
    """``trainstack:autoReleaseAt``: a real UTC time ``YYYY-MM-DDTHH:MM:SSZ`` that is still ahead, or None.

    ECS rejects a release time in the past (RunInstances ``AutoReleaseTime``: at least 30 minutes
    ahead); a date that does not exist (2025-02-30) is refused here rather than by the API."""
    if not value:
        return None
    try:
        when = _dt.datetime.strptime(value, AUTO_RELEASE_FORMAT).replace(tzinfo=_dt.timezone.utc)
    except (ValueError, TypeError):
        raise InputError(f"trainstack:autoReleaseAt {value!r} must be a real UTC time like 2031-01-31T18:00:00Z "
                         "(a date that exists, 24-hour time, Z)") from None
    now = now or _dt.datetime.now(_dt.timezone.utc)
    if when <= now:
        raise InputError(f"trainstack:autoReleaseAt {value} is in the past; ECS releases nodes only at a "
                         "future time", hint="set a later time or remove trainstack:autoReleaseAt")
    return value


check_auto_release_at = check_auto_release_time


def storage_generation(value: Optional[str]) -> int:
    """``trainstack:storageGeneration``: a whole number from 1 (bad input: a clear error)."""
    if value is None or value == "":
        return 1
    try:
        generation = int(str(value), 10)
    except ValueError:
        generation = 0
    if not 1 <= generation <= 9999:
        raise InputError(f"trainstack:storageGeneration {value!r} is not a whole number from 1 to 9999",
                         hint="`pulumi config set trainstack:storageGeneration 2` for a new stack bucket next to a "
                              "retained one")
    return generation


def check_stack_config(config: dict[str, Any], secret_keys: Iterable[str] = ()) -> None:
    """Provider credentials only as secrets (docs/provisioning.md); a plain one is refused."""
    secret = set(secret_keys)
    plain = [k for k in PLAIN_CREDENTIAL_KEYS if config.get(k) not in (None, "") and k not in secret]
    if plain:
        raise InputError(f"{', '.join(plain)} is set in plain stack config; credentials never go in plain text",
                         hint="remove it and use the credentials chain, or `pulumi config set --secret "
                              f"{plain[0]} ...`")


@dataclass(frozen=True)
class StackInputs:
    """What a stack's config gives the program, checked: the profile (stack overrides applied), the
    file it came from, the hard deadline and the bucket generation."""

    profile: TrainingProfile
    path: Path
    auto_release_time: Optional[str] = None
    generation: int = 1
    policy_config: Optional[Path] = None


def stack_inputs(config: Mapping[str, Optional[str]], project: str, root: Path = PROJECT_ROOT,
                 secret_keys: Iterable[str] = ()) -> StackInputs:
    """The stack config (full ``namespace:key`` names) read the way the program reads it: credentials
    only as secrets, the profile path confined to stacks/, the zone and price-book overrides, the
    region check, the release time, the storage generation and the policy config's path."""
    check_stack_config(dict(config), secret_keys)
    value = config.get(f"{project}:profile")
    if not value:
        raise InputError(f"stack config has no {project}:profile",
                         hint=f"pulumi config set {project}:profile profiles/<name>.yaml")
    path = profile_path(value, root)
    profile = load_profile_with_overrides(path, zone=config.get(f"{project}:zone"),
                                          price_book=config.get(f"{project}:priceBook"), root=root,
                                          instance_type=config.get(f"{project}:instanceType"))
    check_region(profile, config.get("alicloud:region"))
    return StackInputs(profile=profile, path=path,
                       auto_release_time=check_auto_release_time(config.get(f"{project}:autoReleaseAt")),
                       generation=storage_generation(config.get(f"{project}:storageGeneration")),
                       policy_config=policy_config_path(config, project, root))


def policy_config_path(config: Mapping[str, Optional[str]], project: str, root: Path = PROJECT_ROOT) -> Optional[Path]:
    """``trainstack:policyConfig`` as a path under ``<root>/stacks`` (None when the stack sets none)."""
    value = config.get(f"{project}:policyConfig")
    if not value:
        return None
    return profile_path(value, root, key=f"{project}:policyConfig", example="policy-config.json")


def plan_for_config(config: Mapping[str, Optional[str]], project: str, root: Path = PROJECT_ROOT,
                    secret_keys: Iterable[str] = (), policy_file: Optional[Path] = None) -> Plan:
    """The checked Plan the program builds for a stack's config (:func:`stack_inputs`, then the rule book)."""
    return stack_plan(config, project, root, secret_keys, policy_file)[1]


def stack_plan(config: Mapping[str, Optional[str]], project: str, root: Path = PROJECT_ROOT,
               secret_keys: Iterable[str] = (), policy_file: Optional[Path] = None) -> tuple[StackInputs, Plan]:
    """The stack's inputs and the checked Plan the program builds from them: the resolver runs under the
    exceptions of the stack's ``trainstack:policyConfig`` (``policy_file``, a ``--policy-config FILE``,
    replaces it), the file ``pulumi up --policy-pack-config`` reads too."""
    from .rules import planned
    from .rules.policy_config import load_allowances

    inputs = stack_inputs(config, project, root, secret_keys)
    allowances = load_allowances(policy_file or inputs.policy_config)
    return inputs, planned(inputs.profile, file=str(inputs.path), allowances=allowances)
