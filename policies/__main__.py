"""Entry point Pulumi runs for `pulumi preview --policy-pack policies` (see docs/policies.md).

PolicyPack(...) starts the analyzer's gRPC server and blocks forever: nothing imports this file.
Each policy carries its default enforcement level (rules.DEFAULT_ENFORCEMENT); a
--policy-pack-config file overrides levels and settings per policy.
"""

from pulumi_policy import EnforcementLevel, PolicyPack

if __package__:  # python -m policies (from the repository root)
    from .rules import ALL_POLICIES
else:  # Pulumi: runpy.run_path("policies") puts policies/ first on sys.path
    from rules import ALL_POLICIES

PolicyPack(
    name="trainstack-guardrails",
    policies=ALL_POLICIES,
    enforcement_level=EnforcementLevel.MANDATORY,
)
