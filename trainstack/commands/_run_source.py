"""The profile and plan of a run, from ``PROFILE`` or ``--stack NAME`` (status, calibrate).

The stack's config is read exactly as the Pulumi program reads it (profile path, zone override,
region check: :mod:`trainstack.stack_config`), so the plan is the one `pulumi up` deploys.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from ..errors import InputError
from ..plan import Plan
from ..profile import TrainingProfile


def load_run(profile_arg: Optional[str], stack: Optional[str], command: str) -> tuple[TrainingProfile, Plan, str]:
    """(profile, checked plan, how the user named it)."""
    from ..profile import load_profile
    from ..rules import planned
    from ..stack_config import check_region, load_profile_with_overrides, profile_path

    if bool(profile_arg) == bool(stack):
        raise InputError(f"{command} needs a PROFILE path or --stack NAME (one of them)")
    if stack:
        from ..preview.sources import find_project, stack_config

        project = find_project()
        config, _ = stack_config(project, stack)
        value = config.get(f"{project.name}:profile")
        if not value:
            raise InputError(f"stack {stack} has no {project.name}:profile",
                             hint=f"pulumi config set {project.name}:profile profiles/<name>.yaml")
        path = profile_path(value, project.root)
        profile = load_profile_with_overrides(path, zone=config.get(f"{project.name}:zone"),
                                              instance_type=config.get(f"{project.name}:instanceType"))
        check_region(profile, config.get("alicloud:region"))
        # the stack's policy config (trainstack:policyConfig) grants the resolver the exceptions the program gets
        from ..rules.policy_config import load_allowances
        from ..stack_config import policy_config_path

        allowances = load_allowances(policy_config_path(config, project.name, project.root))
        return profile, planned(profile, file=str(path), allowances=allowances), f"stack {stack}"
    if not Path(profile_arg).is_file():  # type: ignore[arg-type]
        raise InputError(f"{profile_arg}: no such profile file")
    profile = load_profile(profile_arg)
    return profile, planned(profile, file=profile_arg), str(profile_arg)
