"""The training profile: what a team wants to train (``model``), and how it is read (``loading``)."""

from .alerts import ALERT_EVENTS, AlertsSpec, WebhookSecret
from .loading import load_profile, parse_profile, profile_json_schema
from .model import (
    DNS_LABEL, SCHEMA_URL_COMMENT, AccessSpec, Checkpointing, DlcSpec, Framework, JobSpec, Loss, LoraSpec, Method, ModelSpec, NetworkSpec,
    Precision, ResourcesSpec, StorageSpec, TrainingProfile, TrainingSpec,
)
from .yamlfile import MAX_PROFILE_BYTES, read_yaml_document

__all__ = [
    "ALERT_EVENTS", "AccessSpec", "AlertsSpec", "WebhookSecret", "Checkpointing", "DNS_LABEL", "DlcSpec", "Framework", "Loss", "JobSpec", "LoraSpec", "MAX_PROFILE_BYTES", "Method", "ModelSpec",
    "NetworkSpec", "Precision", "ResourcesSpec", "SCHEMA_URL_COMMENT", "StorageSpec", "TrainingProfile",
    "TrainingSpec", "load_profile", "parse_profile", "profile_json_schema", "read_yaml_document",
]
