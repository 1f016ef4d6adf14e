"""The rule book: every rule a profile and its plan must pass, in one place.

``validate``, ``resolve``, ``plan`` and the Pulumi program all go through :func:`planned` (or its
two halves), so they agree: a profile ``validate`` accepts never fails ``plan`` with exit 2, and a
plan the rule book accepts never fails in component code. Two kinds of rules:

* profile rules that need the catalog (:mod:`.profile_rules`, :mod:`.dlc_profile`): names the
  catalog must know, the names trainstack derives from ``name`` (host names, instance names) within
  Alibaba's rules, a DLC job's image and quota spec;
* plan rules that need the resolution (:mod:`.plan_rules`, :mod:`.day_two`): ESSD sizes, tag
  counts, the self-healing pool, deployment-set groups, the launch, the DLC job request, the node
  bootstrap, and what would hurt the second `pulumi up`.

* policy verdicts (:mod:`.verdicts`): the policy pack's decisions (:mod:`.checks`, named in
  :mod:`.policy_book`), run on the view of what the stack declares (:mod:`.stack_view`; from a Plan:
  :mod:`.plan_view`) with the one policy config (:mod:`.policy_config`); a mandatory one is exit 4.

Infeasibility is not a rule violation: it stays exit 3 from ``resolve``/``plan``.
Components only translate a checked Plan into resources.
"""

from .day_two import day_two_problems
from .dlc_profile import dlc_profile_problems, image_problem, quota_spec_problems, wants_dlc
from .memo import check_plan, planned, resolution, reusing_plans
from .plan_rules import (
    ESS_SPOT_DURATIONS, PLAN_RULES, bootstrap_message, bootstrap_problem, checkpoint_disks_planned, essd_problem,
    plan_problems,
)
from .profile_rules import (
    check_profile, derived_names, layout_problems, name_problems, profile_problems, profile_warnings,
)
from .verdicts import Verdict, plan_verdicts

__all__ = [
    "ESS_SPOT_DURATIONS", "PLAN_RULES", "Verdict", "bootstrap_message", "bootstrap_problem", "check_plan", "check_profile",
    "checkpoint_disks_planned", "day_two_problems", "derived_names", "dlc_profile_problems", "essd_problem",
    "image_problem", "layout_problems", "name_problems", "plan_problems", "plan_verdicts", "planned", "profile_problems",
    "profile_warnings", "quota_spec_problems", "resolution", "reusing_plans", "wants_dlc",
]
