"""The queue pairs of each ERI, read once from DescribeInstanceTypes when the catalog does not know them.

All ERIs of an instance share the type's queue pairs (``QueuePairNumber`` of DescribeInstanceTypes;
data/service_limits.yaml ecs.eri.queue_pairs_shared_per_instance), and an ERI created without a
number takes them all, so the next ERI cannot attach. The catalog does not publish the maximum
offline; ``QueuePairsPerEri`` is a read-only dynamic resource that asks DescribeInstanceTypes at
create time, splits the maximum with the same pure rule as the plan
(:func:`trainstack.layout.network.queue_pairs_per_eri`) and keeps the answer in state: ``read``
(``pulumi refresh``) returns the stored value and ``diff`` compares only the type and the ERI count,
so a later change on Alibaba's side never replaces a node (``queue_pair_number`` is ForceNew).
Credentials: the Alibaba Cloud default chain of the machine running ``pulumi up``.

The lookup function is a module-level name (:data:`lookup`) so tests can replace it.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import pulumi
import pulumi.dynamic as dyn

from trainstack.cloud.ecs_types import describe_queue_pairs
from trainstack.errors import CloudApiError
from trainstack.layout.network import queue_pairs_per_eri

KIND = "ecs-queue-pairs"


#: ``(region, instance_type) -> the type's queue pairs | None``; tests replace it.
lookup: Callable[[str, str], Optional[int]] = describe_queue_pairs


def _answer(props: dict) -> dict:
    region, itype, eris = props["region"], props["instance_type"], int(props["eris"])
    try:
        total = lookup(region, itype)
    except CloudApiError:
        raise
    except Exception as exc:  # SDK / credentials errors: say what failed, no traceback
        raise CloudApiError(f"DescribeInstanceTypes for {itype} in {region} failed: {exc}",
                            hint="check the Alibaba Cloud credentials of the machine running `pulumi up` "
                                 "(ecs:DescribeInstanceTypes)") from None
    if not total:
        raise CloudApiError(f"DescribeInstanceTypes gives no QueuePairNumber for {itype}: its {eris} ERIs cannot be "
                            "given queue pairs safely (one without a number takes them all)",
                            hint="set the type's queue_pair_number_max with `trainstack catalog refresh` or ask "
                                 "Alibaba support for the value")
    return {**props, "max": total, "per_eri": queue_pairs_per_eri(total, eris)}


class _Provider(dyn.ResourceProvider):
    def create(self, props: dict) -> dyn.CreateResult:
        return dyn.CreateResult(id_=f"{props['region']}:{props['instance_type']}:{props['eris']}", outs=_answer(props))

    def read(self, id_: str, props: dict) -> dyn.ReadResult:
        return dyn.ReadResult(id_=id_, outs=props)  # the stored answer: never re-read (ForceNew downstream)

    def diff(self, _id: str, olds: dict, news: dict) -> dyn.DiffResult:
        changed = [k for k in ("region", "instance_type", "eris") if olds.get(k) != news.get(k)]
        return dyn.DiffResult(changes=bool(changed), replaces=changed, delete_before_replace=False)

    def delete(self, _id: str, _props: dict) -> None:
        return None  # a lookup: nothing to delete


class QueuePairsPerEri(dyn.Resource):
    """``per_eri``: queue pairs of each ERI; ``max``: the type's total."""

    per_eri: pulumi.Output[int]
    max: pulumi.Output[int]

    def __init__(self, name: str, *, region: str, instance_type: str, eris: int,
                 opts: Optional[pulumi.ResourceOptions] = None):
        props: dict[str, Any] = {"kind": KIND, "region": region, "instance_type": instance_type, "eris": eris,
                                 "per_eri": None, "max": None}
        super().__init__(_Provider(), name, props, opts)
