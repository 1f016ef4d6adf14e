"""One credentials chain for every OpenAPI call: Alibaba's ``alibabacloud-credentials`` default chain.

First match wins: ``ALIBABA_CLOUD_ACCESS_KEY_ID``/``_SECRET`` (+ ``ALIBABA_CLOUD_SECURITY_TOKEN``),
``~/.alibabacloud/credentials.ini`` (``ALIBABA_CLOUD_PROFILE``), ``~/.aliyun/config.json``, an
ECS/OIDC RAM role. Building a client does no network I/O; credentials are resolved at the first call.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from ..errors import CloudApiError
from ..lazy import LazyModule

if TYPE_CHECKING:
    from alibabacloud_credentials import client as credentials_client
    from alibabacloud_tea_openapi import models as openapi_models
else:  # the SDK core (~2 s) only when a client is built
    credentials_client = LazyModule("alibabacloud_credentials.client")
    openapi_models = LazyModule("alibabacloud_tea_openapi.models")

CREDENTIALS_FIX = (
    "configure Alibaba Cloud credentials (the standard chain, first match wins): set "
    "ALIBABA_CLOUD_ACCESS_KEY_ID and ALIBABA_CLOUD_ACCESS_KEY_SECRET (plus ALIBABA_CLOUD_SECURITY_TOKEN "
    "for STS); or `aliyun configure` (~/.aliyun/config.json); or a profile in "
    "~/.alibabacloud/credentials.ini (ALIBABA_CLOUD_PROFILE selects one); or run on ECS with a RAM role "
    "(ALIBABA_CLOUD_ECS_METADATA=<role name>)")


def sdk_config(region: str, **options: Any) -> Any:
    """The tea-openapi ``Config`` every SDK client is built from: the default chain and the region
    (each SDK derives its endpoint from the region)."""
    CredentialClient, Config = credentials_client.Client, openapi_models.Config  # imported first: see below
    # alibabacloud-credentials attaches its own stderr handlers to the "credentials" logger (at
    # import) and logs each provider's failure with a traceback, several times over; the
    # CloudApiError trainstack raises carries the chain's messages once, so those records are muted
    logging.getLogger("credentials").setLevel(logging.CRITICAL)
    return Config(credential=CredentialClient(), region_id=region, **options)


def credential_client() -> Any:
    """The default chain's client (no network I/O until credentials are asked for)."""
    CredentialClient = credentials_client.Client
    logging.getLogger("credentials").setLevel(logging.CRITICAL)  # see sdk_config
    return CredentialClient()


def require_credentials(client: Any = None) -> Any:
    """The chain's credentials now, or exit 5 saying how to configure them. Commands that read a live
    run call it first, so a missing configuration is one clear message, not a failed API call."""
    try:
        cred = (client or credential_client()).get_credential()
        if not getattr(cred, "access_key_id", None):
            raise ValueError("the chain returned no access key")
        return cred
    except Exception as exc:  # the chain raises CredentialException (or anything its providers raise)
        detail = " ".join(str(exc).split())[:400]
        raise CloudApiError(f"no Alibaba Cloud credentials: {detail}", hint=CREDENTIALS_FIX) from None
