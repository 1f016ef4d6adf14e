"""A live view of a run, pure: the heartbeat record the nodes write, what the cloud says about the
nodes or the DLC job, and the view ``trainstack status`` prints (``--json``: docs/status.md).

``record``: the heartbeat contract (``trainstack.heartbeat/1``), validated when read;
``view``: spend, ETA, budget projection and plan-versus-measured from heartbeats and observations;
``render``: the text. The cloud calls are in :mod:`trainstack.cloud` (oss, ecs, dlc).
"""

from .record import DlcJobObservation, Heartbeat, HeartbeatError, InstanceObservation, parse_heartbeat
from .view import STATUS_SCHEMA_VERSION, Prediction, StatusView, build_view, prediction_for

__all__ = ["DlcJobObservation", "Heartbeat", "HeartbeatError", "InstanceObservation", "Prediction",
           "STATUS_SCHEMA_VERSION", "StatusView", "build_view", "parse_heartbeat", "prediction_for"]
