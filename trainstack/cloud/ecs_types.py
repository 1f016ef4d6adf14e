"""One instance type's facts read at deploy time (DescribeInstanceTypes), for the Pulumi program.

Apart from :mod:`trainstack.cloud.ecs` (catalog refresh and preflight, which use the response
parsers of :mod:`.ecs_parse`) so the program's components need nothing above the cloud adapters. Same client, same
retry policy, same exit-5 errors.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from ..errors import CloudApiError
from ..lazy import LazyModule
from .credentials import CREDENTIALS_FIX, sdk_config
from .errors import ApiErrorInfo, cloud_error
from .retry import ECS_READS, GaveUp, with_retries

if TYPE_CHECKING:
    from alibabacloud_ecs20140526 import client as ecs_client, models as ecs
else:  # the SDK only when the program looks a type up at deploy time
    ecs_client = LazyModule("alibabacloud_ecs20140526.client")
    ecs = LazyModule("alibabacloud_ecs20140526.models")


def describe_queue_pairs(region: str, instance_type: str) -> Optional[int]:
    """DescribeInstanceTypes ``QueuePairNumber`` of one type (None when the API does not say)."""
    try:
        client = ecs_client.Client(sdk_config(region))
    except Exception as exc:  # the credential chain can fail while it is being built
        raise CloudApiError(f"cannot create the ECS API client for {region}: {ApiErrorInfo.from_exception(exc).detail}",
                            hint=CREDENTIALS_FIX) from None
    request = ecs.DescribeInstanceTypesRequest(instance_types=[instance_type])
    try:
        resp = with_retries(lambda: client.describe_instance_types(request), policy=ECS_READS)
    except GaveUp as failed:
        raise cloud_error("ecs", "DescribeInstanceTypes", region, failed.cause, what=instance_type,
                          attempts=failed.attempts) from None
    types = getattr(getattr(resp.body, "instance_types", None), "instance_type", None) or []
    for t in types:
        if getattr(t, "instance_type_id", None) == instance_type and getattr(t, "queue_pair_number", None):
            return int(t.queue_pair_number)
    return None
