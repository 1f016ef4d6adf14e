"""The profile's ``alerts:``: where the node agent posts what happens to the job (docs/alerts.md).

A webhook URL carries its own token (DingTalk's ``access_token``, Slack's path), so the profile never
holds one: it names a KMS Secrets Manager secret whose value is the URL, read by the node at run time
like ``job.secrets``. The rules that need the rest of the profile or the plan (egress or a relay, ECS
only) are the rule book's (trainstack.rules.alerts_rules).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal, Optional

from pydantic import Field, field_validator, model_validator

from .base import _Strict
from .job import KMS_KEY_ID, KMS_SECRET_NAME

#: the events a profile may ask for, in the order a job meets them
ALERT_EVENTS = ("job_start", "preemption", "replacement", "job_end", "guard_stop")
AlertEvent = Literal["job_start", "preemption", "replacement", "job_end", "guard_stop"]
AlertFormat = Literal["dingtalk", "slack", "json"]
#: an HTTP(S) forward proxy inside the VPC: IPv4:port (a name could resolve outside the VPC)
RELAY = re.compile(r"(?:http://)?(\d{1,3}(?:\.\d{1,3}){3}):(\d{1,5})/?")
_URLISH = re.compile(r"^[a-z][a-z0-9+.-]*://|^(?:www\.|hooks\.|oapi\.)", re.I)


class WebhookSecret(_Strict):
    """The KMS secret that holds the webhook URL (its value: the whole URL, token included)."""

    kms_secret: str = Field(description="Name of a KMS Secrets Manager secret in the job's region; its value is the "
                                        "webhook URL")
    kms_key_id: Optional[str] = Field(
        None, description="The KMS key that encrypts the secret, if it is your own key (the node role then also "
                          "gets kms:Decrypt on it)")

    @field_validator("kms_secret")
    @classmethod
    def _name(cls, v: str) -> str:
        if not KMS_SECRET_NAME.fullmatch(v):
            raise ValueError("a KMS secret name is 1-192 letters, digits and _ / + = . @ -")
        return v

    @field_validator("kms_key_id")
    @classmethod
    def _key(cls, v: Optional[str]) -> Optional[str]:
        if v is not None and not KMS_KEY_ID.fullmatch(v):
            raise ValueError("a KMS key id looks like key-xxxxxxxx (an alias cannot name a RAM policy resource)")
        return v


class AlertsSpec(_Strict):
    """``alerts:``: the node agent posts these events of the job to one webhook (ECS nodes only)."""

    webhook: WebhookSecret = Field(description="{kms_secret: NAME}: the KMS secret whose value is the webhook URL "
                                               "(never the URL itself)")
    format: AlertFormat = Field(description="dingtalk (robot, markdown), slack (incoming webhook, text + blocks) "
                                            "or json (the event record)")
    events: tuple[AlertEvent, ...] = Field(ALERT_EVENTS, min_length=1, strict=False,  # a YAML list
                                           description="Which events are posted")
    relay: Optional[str] = Field(
        None, description="An HTTP(S) forward proxy inside network.vpc_cidr (IPv4:port) the nodes post through, "
                          "instead of network.internet_egress")

    @model_validator(mode="before")
    @classmethod
    def _no_literal_url(cls, data: Any) -> Any:
        # raised for the whole section, so the value given (a URL and its token) is never repeated
        hook = data.get("webhook") if isinstance(data, dict) else None
        if isinstance(hook, str):
            raise ValueError("alerts.webhook holds text, and a webhook URL carries its token: store the URL as the "
                             "value of a KMS Secrets Manager secret and give webhook: {kms_secret: NAME}")
        name = hook.get("kms_secret") if isinstance(hook, dict) else None
        if isinstance(name, str) and (_URLISH.search(name) or ":" in name):
            raise ValueError("alerts.webhook.kms_secret holds a URL, not a KMS secret name (a webhook URL carries its "
                             "token): store the URL as the value of a KMS secret and name the secret here")
        return data

    @field_validator("events")
    @classmethod
    def _unique(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        if len(set(v)) != len(v):
            raise ValueError("lists an event twice")
        return v

    @field_validator("relay")
    @classmethod
    def _relay(cls, v: Optional[str]) -> Optional[str]:
        if v is None:
            return v
        m = RELAY.fullmatch(v)
        try:
            ok = m is not None and ipaddress.ip_address(m.group(1)).is_private and 1 <= int(m.group(2)) <= 65535
        except ValueError:
            ok = False
        if not ok:
            raise ValueError("must be a forward proxy's private IPv4 address and port, e.g. 10.0.3.7:3128")
        return v

    def relay_address(self) -> Optional[tuple[str, int]]:
        """(IPv4, port) of the relay, or None."""
        m = RELAY.fullmatch(self.relay) if self.relay else None
        return (m.group(1), int(m.group(2))) if m else None
