"""A stack's config as the Pulumi program reads it: which profile, which overrides, which deadline.

Pure, so ``trainstack validate --stack`` and the offline plan apply exactly the rules the program
applies (``components/program.py`` calls these), without importing Pulumi.

Stack config (``stacks/Pulumi.<stack>.yaml``):
- ``trainstack:profile`` (required): profile path, relative to ``stacks/`` or absolute.
- ``trainstack:zone`` (optional): pin the zone (overrides the profile's ``zone``).
- ``trainstack:autoReleaseAt`` (optional): hard deadline, UTC ``YYYY-MM-DDTHH:MM:SSZ``; ECS
  releases the nodes then (checkpoint storage is separate and survives).
- ``alicloud:region`` (optional): must equal the profile's region if set.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Optional

from .errors import InputError
from .plan import Plan
from .profile import TrainingProfile, parse_profile, read_yaml_document

PROJECT_ROOT = Path(__file__).resolve().parents[1]
STACKS_DIR_NAME = "stacks"
AUTO_RELEASE_FORMAT = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


def profile_path(value: str, root: Path = PROJECT_ROOT) -> Path:
    """``trainstack:profile`` as a path: absolute as given, else relative to ``<root>/stacks``."""
    p = Path(value).expanduser()
    return p if p.is_absolute() else root / STACKS_DIR_NAME / p


def load_profile_with_overrides(path: Path, zone: Optional[str] = None) -> TrainingProfile:
    """Load the profile, applying stack-level overrides before validation (so a wrong zone is
    reported like a wrong profile field)."""
    doc = read_yaml_document(path)
    if zone:
        doc["zone"] = zone
    return parse_profile(doc, file=str(path))


def check_region(profile: TrainingProfile, configured: Optional[str]) -> None:
    if configured and configured != profile.region:
        raise InputError(
            f"alicloud:region is {configured} but the profile {profile.name} is for {profile.region}",
            hint="remove alicloud:region from the stack config (the profile decides the region) "
                 "or change the profile's region")


def check_auto_release_time(value: Optional[str]) -> Optional[str]:
    """``trainstack:autoReleaseAt`` as given, or None when unset; a clear error when malformed."""
    if value and not AUTO_RELEASE_FORMAT.match(value):
        raise InputError(f"trainstack:autoReleaseAt {value!r} must be UTC like 2025-01-31T18:00:00Z")
    return value or None


def plan_for_config(config: dict[str, str], project: str, root: Path = PROJECT_ROOT) -> Plan:
    """The checked Plan the program builds for a stack's config (full ``namespace:key`` names):
    the same profile path rules, overrides and rule book as ``components/program.py``."""
    from .rules import planned

    value = config.get(f"{project}:profile")
    if not value:
        raise InputError(f"stack config has no {project}:profile",
                         hint=f"pulumi config set {project}:profile profiles/<name>.yaml")
    path = profile_path(value, root)
    profile = load_profile_with_overrides(path, zone=config.get(f"{project}:zone"))
    check_region(profile, config.get("alicloud:region"))
    check_auto_release_time(config.get(f"{project}:autoReleaseAt"))
    return planned(profile, file=str(path))
