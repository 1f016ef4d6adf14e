"""A PAI-DLC profile's rules that need the catalog or the DLC facts.

Which profiles want DLC, a DLC job's image and its quota spec are decided once, in the DLC strategy
(trainstack.placement.dlc / dlc_pods, a layer below the rule book); the rule book reports the same
functions' problems, so a profile it accepts is never refused later for its image or quota spec.
"""

from __future__ import annotations

from ..catalog import Catalog, dlc_facts
from ..errors import Problem
from ..placement.dlc import wants_dlc
from ..placement.dlc_pods import image_problem, quota_spec_problems
from ..profile import TrainingProfile

__all__ = ["dlc_profile_problems", "image_problem", "quota_spec_problems", "wants_dlc"]


def dlc_profile_problems(profile: TrainingProfile, catalog: Catalog) -> list[Problem]:
    """A DLC job's rules that need the catalog or the DLC facts: an image it can get (a pinned one, or an
    official one to look up), a quota node spec trainstack can plan (``dlc.quota_spec``), and, on a
    Lingjun quota, PAI's preset NCCL variables left as PAI sets them (never the eRDMA set)."""
    if not wants_dlc(profile):
        return []
    out = [p for p in (image_problem(profile),) if p is not None]
    out += quota_spec_problems(profile, catalog)
    spec = profile.dlc.quota_spec
    lingjun = {s.name: s for s in dlc_facts().lingjun_specs}
    if spec in lingjun and lingjun[spec].nccl_preset:
        preset = dlc_facts().preset(lingjun[spec].nccl_preset or "")
        for name in preset.keep:
            value = profile.job.env.get(name)
            if value is not None and value != preset.env[name]:
                out.append(Problem(path=f"job.env.{name}", given=value, has_given=True, allowed=preset.env[name],
                                   message=f"PAI presets {name}={preset.env[name]} on Lingjun spec {spec} "
                                           f"[PAI-RDMA]; another value breaks or slows NCCL on its RDMA network "
                                           f"(the eRDMA set, e.g. NCCL_IB_HCA=erdma, is for eRDMA ECS types); "
                                           f"fix: remove it"))
    return out
