"""Names a job may not set (issue 13 item 8, narrowed by issue 36 item 4): job.env, job.secrets and the
``NAME=value`` words of job.command reach the trainer's environment, so none may shadow what trainstack
itself gives the trainer. Only what trainstack really exports to it, or what would change how any script
runs, is reserved:

- the topology the launchers export (:data:`trainstack.launchers.RESERVED_ENV`: NNODES, NODE_RANK,
  MASTER_ADDR, WORLD_SIZE, FORCE_TORCHRUN, ..., torchrun's ``PET_*`` option variables) and what a
  launch adds for its launcher (torchrun elastic's ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE``);
- trainstack's own ``TRAINSTACK_*`` names (the trainer's paths: TRAINSTACK_CHECKPOINT_DIR,
  TRAINSTACK_HOSTFILE, ...; the launch script's values it takes before job.env) and the arrays job.env
  defines for the launch script (LAUNCH_ARGV, JOB_SECRETS);
- the few shell and loader variables that change how any script runs (below).

The launch script's own variables (ETC, STATE, RUN, LIB, WORKDIR, DEADLINE, TORCHRUN, ...) and the node's
files' (REGION, STOP_ON, CHECKPOINT_DIR, ...) are not: job.env is sourced only in the subshells that start
the NCCL check and the trainer, after they took what they run into TRAINSTACK_* names, so those names
reach the trainer unchanged and cannot change the script (tests/bootstrap/test_job_env_names.py).
"""

from __future__ import annotations

from trainstack.errors import Problem
from trainstack.launchers import reserved as launcher_reserved
from trainstack.launchers.torchrun import ELASTIC_ENV

#: change how bash or the dynamic loader run every later command
SHELL_VARIABLES = frozenset({"BASH_ENV", "ENV", "IFS", "SHELLOPTS", "BASHOPTS", "PS4", "CDPATH", "GLOBIGNORE",
                             "LD_PRELOAD", "LD_AUDIT", "PATH"})
PREFIXES = ("TRAINSTACK_",)
#: what a launch exports for its launcher beside the topology
LAUNCH_EXPORTS = frozenset(name for name, _ in ELASTIC_ENV)
#: the arrays job.env defines for the launch script (trainstack.bootstrap.files.job_env)
LAUNCH_ARRAY, SECRETS_ARRAY = "LAUNCH_ARGV", "JOB_SECRETS"
JOB_ARRAYS = frozenset({LAUNCH_ARRAY, SECRETS_ARRAY})


def is_reserved(name: str) -> bool:
    return (name in SHELL_VARIABLES or name in LAUNCH_EXPORTS or name in JOB_ARRAYS or name.startswith(PREFIXES)
            or launcher_reserved(name))


def reserved_problems(names: dict[str, list[str]]) -> list[Problem]:
    """One problem per reserved name, by the field that set it."""
    out = []
    for field, given in names.items():
        for name in given:
            if is_reserved(name):
                out.append(Problem(
                    path=f"{field}.{name}" if field != "job.command" else field,
                    message=(f"{name} is set by trainstack itself for the trainer (launcher topology, trainstack's "
                             "TRAINSTACK_* names and the launch script's arrays) or changes how the shell runs; a "
                             "job may not override it; fix: remove it, or use another name"),
                    given=name, has_given=True))
    return out
