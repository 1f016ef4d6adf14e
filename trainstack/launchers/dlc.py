"""A PAI-DLC job's launch rules: the command in the pod's topology form, no job variable that
shadows the topology PAI or the launchers set, and no ``job.secrets``.

PAI-DLC documents no store the pod reads secrets from: CreateJob's ``Envs`` and
``CustomEnvs`` (even with ``Visible`` off) carry the VALUE in the request, so trainstack,
its Pulumi state and the console would hold it; ``CredentialConfig`` injects a RAM role's
credentials, not a secret's value (alibabacloud-pai-dlc20201203 1.11.6, models
CreateJobRequest / CreateJobRequestCustomEnvs / CredentialConfig). So job.secrets is refused
for DLC, with the way out.
"""

from __future__ import annotations

from ..errors import Problem
from . import check_command, reserved
from .topology import topology_from_plan


def dlc_job_problems(plan) -> list[Problem]:
    command = plan.dlc.command if plan.dlc is not None else plan.job.command
    problems = check_command(command, topology_from_plan(plan))
    problems += [Problem(path=f"job.env.{name}", given=name, has_given=True,
                         message=f"{name} is set in every PAI-DLC pod by PAI or by trainstack's launcher (the job's "
                                 "topology); a job may not override it; fix: remove it, or use another name")
                 for name in plan.job.env if reserved(name)]
    return problems + secrets_problems(plan.job.secrets)


def secrets_problems(secrets) -> list[Problem]:
    """job.secrets on a DLC job (known from the plan, or from ``resources.target: dlc``)."""
    if not secrets:
        return []
    return [Problem(path="job.secrets", given=sorted(secrets), has_given=True,
                    message="job.secrets works on ECS nodes only: PAI-DLC documents no secret store for a job's "
                            "environment (CreateJob Envs would carry the value itself); fix: run on ECS "
                            "(resources.target: ecs), or have the training code read the secret from KMS with the "
                            "job's RAM role")]
