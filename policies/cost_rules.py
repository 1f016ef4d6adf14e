"""The hourly budget of a stack's GPU nodes, priced from each node's spot price limit, else the planned
price it carries (trainstack:planned-price), else the catalog (trainstack.rules.checks.cost)."""

from __future__ import annotations

from typing import Optional

# _base before trainstack: from a bare checkout it puts the checkout's trainstack on sys.path
if __package__:
    from . import _base as B
    from . import _view as V
else:  # run by Pulumi from inside policies/
    import _base as B  # type: ignore[no-redef]
    import _view as V  # type: ignore[no-redef]

from pulumi_policy import EnforcementLevel, StackValidationPolicy

BudgetUnverified = B.BudgetUnverified


def gpu_hourly_budget(level: Optional[EnforcementLevel] = None) -> StackValidationPolicy:
    return B.stack_policy(B.GPU_HOURLY_BUDGET, level, lambda args: V.stack_view(args.resources))
