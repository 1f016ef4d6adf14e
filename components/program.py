"""The Pulumi program: stack config -> profile -> Plan -> TrainingStack -> exports.

``__main__.py`` only calls :func:`run_program`; the offline preview and the tests call
:func:`build` (a Plan in, the stack and its exports out) or :func:`run_program` with an injected
``plan_loader``.

The stack config keys and their rules are in :mod:`trainstack.stack_config` (pure, shared with
``trainstack validate --stack`` and the offline plan).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Optional, Union

import pulumi
import pulumi_alicloud as alicloud

from trainstack.errors import InputError
from trainstack.plan import Plan
from trainstack.profile import TrainingProfile
from trainstack.rules import planned
from trainstack.rules.policy_config import load_allowances
from trainstack.stack_config import (  # noqa: F401 (re-exported)
    PLAIN_CREDENTIAL_KEYS, PROJECT_ROOT, check_auto_release_time, check_region, check_stack_config,
    load_profile_with_overrides, profile_path, stack_inputs, storage_generation, trusted_profile,
)

from .stack import TrainingStack

#: alicloud:* stack config the explicit provider passes on (an explicit provider ignores them
#: otherwise). Credentials normally come from the environment / credentials file / RAM role.
PROVIDER_CONFIG = {"profile": "profile", "sharedCredentialsFile": "shared_credentials_file",
                   "ecsRoleName": "ecs_role_name"}
PROVIDER_SECRET_CONFIG = {"accessKey": "access_key", "secretKey": "secret_key", "securityToken": "security_token"}

PlanLoader = Callable[[TrainingProfile], Plan]


def default_plan_loader(profile: TrainingProfile) -> Plan:
    return planned(profile)


def make_provider(region: str, name: Optional[str] = None) -> alicloud.Provider:
    cfg = pulumi.Config("alicloud")
    args: dict[str, Any] = {}
    for key, arg in PROVIDER_CONFIG.items():
        if (v := cfg.get(key)) is not None:
            args[arg] = v
    for key, arg in PROVIDER_SECRET_CONFIG.items():
        if (v := cfg.get_secret(key)) is not None:
            args[arg] = v
    return alicloud.Provider(name or f"alicloud-{region}", region=region, **args)


def build(plan: Plan, *, provider: Optional[pulumi.ProviderResource] = None,
          auto_release_time: Optional[str] = None, export: bool = True,
          generation: int = 1) -> tuple[TrainingStack, dict[str, Any]]:
    """Declare the stack for a Plan under an explicit provider for the plan's region."""
    provider = provider or make_provider(plan.region)
    stack = TrainingStack(plan.name, plan, opts=pulumi.ResourceOptions(provider=provider),
                          auto_release_time=auto_release_time, storage_generation=generation)
    if export:
        for key, value in stack.outputs.items():
            pulumi.export(key, value)
    return stack, stack.outputs


#: The stack config keys the program reads (``stack_config.stack_inputs`` decides what they mean).
PROGRAM_KEYS = ("profile", "zone", "instanceType", "priceBook", "autoReleaseAt", "storageGeneration", "policyConfig")


def run_program(plan_loader: Optional[PlanLoader] = None, root: Union[str, Path] = PROJECT_ROOT) -> dict[str, Any]:
    """Read the stack config, resolve the Plan and declare everything. Raises TrainstackError
    for user mistakes (``__main__`` turns it into a clean Pulumi error)."""
    from pulumi.runtime.config import get_config, is_config_secret

    keys = [f"trainstack:{k}" for k in PROGRAM_KEYS] + ["alicloud:region", *PLAIN_CREDENTIAL_KEYS]
    config = {k: get_config(k) for k in keys}
    inputs = stack_inputs(config, "trainstack", Path(root),
                          secret_keys=[k for k in PLAIN_CREDENTIAL_KEYS if is_config_secret(k)])
    profile = inputs.profile
    # the resolver runs under the stack's policy config (trainstack:policyConfig), the file the workflows
    # pass to `pulumi up --policy-pack-config`: an allowed PCIe type is planned here as in `trainstack plan`
    plan = plan_loader(profile) if plan_loader else planned(profile, file=str(inputs.path),
                                                            allowances=load_allowances(inputs.policy_config))
    if plan.region != profile.region:
        raise InputError(f"the plan is for {plan.region}, the profile for {profile.region}")
    _, outputs = build(plan, auto_release_time=inputs.auto_release_time, generation=inputs.generation)
    return outputs
