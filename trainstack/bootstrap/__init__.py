"""Node bootstrap: the cloud-init user data that turns a fresh ECS GPU instance into a node of
the training job (driver, eRDMA, storage), the node programs it fetches from the stack bucket
(launcher, agent, heartbeat, spot watcher), and the job settings, rendered from the Plan by pure
code. See docs/bootstrap.md. How job.command is launched: :mod:`trainstack.launchers`."""

from .options import BootstrapOptions
from .render import USER_DATA_LIMIT, NodeFile, check_job, render_files, render_script, render_user_data

__all__ = ["USER_DATA_LIMIT", "BootstrapOptions", "NodeFile", "check_job", "render_files", "render_script",
           "render_user_data"]
