"""Lifecycle options of what a plan creates: what `pulumi up` may replace, ignore or must keep.

Pure decisions over the Plan (components only pass them on as ``pulumi.ResourceOptions``), each with
the provider behaviour that makes it necessary (provider facts: trainstack/catalog/data/provider_facts.json):

* **GPU nodes** ignore, after creation, what trainstack picked and what cannot reach a running node
  anyway: ``user_data`` (cloud-init runs user-data scripts once per instance, and an update stops
  and starts the node: the restart would apply nothing; job settings travel through the job
  settings channel instead), ``image_id`` when it comes from a family lookup (a new public image
  would wipe the system disk: ReplaceSystemDisk), ``spot_price_limit`` when it is the on-demand price
  (ForceNew: a catalog refresh would replace running spot nodes), and ``status`` (the node stops
  itself when its job ends). A stated ``image_id`` or spot price limit is managed: its change shows
  in the diff as what it is (a wipe, a replacement).
* **Fixed-IP nodes** (node 0 of a self-healing cluster too) are replaced delete-before-replace: the new
  node takes the old node's private IP, which the old one holds until it is deleted (create-before-delete
  would fail).
* **The CPFS protocol service** is replaced delete-before-replace (a file system allows one) and its
  throughput is left to CPFS (``protocol_throughput`` is ForceNew: tying it to the capacity would
  replace the service on every resize).
* **Retained storage** (``storage.retain_on_destroy``) is protected and retained, and so is what it
  depends on (the VPC and the services vSwitch under a retained CPFS), so one ``pulumi destroy``
  removes everything else and completes.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..catalog.limits import service_limits
from ..plan import Plan


@dataclass(frozen=True)
class Lifecycle:
    """The options the components set (Python property names; Pulumi sends them camelCase)."""

    ignore_changes: tuple[str, ...] = ()
    delete_before_replace: bool = False
    protect: bool = False
    retain_on_delete: bool = False


def node_ignore_changes(plan: Plan) -> tuple[str, ...]:
    out = ["status", "user_data"]
    if not plan.image.image_id:
        out.append("image_id")
    if plan.spot_strategy == "SpotWithPriceLimit" and plan.spot_price_limit_source != "profile":
        out.append("spot_price_limit")
    return tuple(out)


def node_lifecycle(plan: Plan) -> Lifecycle:
    """An ECS instance of the cluster (fixed private IP, so delete-before-replace)."""
    return Lifecycle(ignore_changes=node_ignore_changes(plan), delete_before_replace=fixed_ips(plan))


def fixed_ips(plan: Plan) -> bool:
    """Whether the cluster's instances hold fixed private IPs: every ECS cluster, node 0 of a multi-node
    self-healing plan too (its IP is the rendezvous address; a replacement node 0 takes it back, which
    create-before-delete would ask for while the old node holds it). A 1-node pool's node does not."""
    return plan.target == "ecs" and (plan.spot_pool is None or plan.elastic)


def retained(plan: Plan) -> Lifecycle:
    """Anything that holds checkpoints (and what it depends on)."""
    keep = plan.storage.retain_on_destroy
    return Lifecycle(protect=keep, retain_on_delete=keep)


def cpfs_retained(plan: Plan) -> bool:
    st = plan.storage
    return plan.target == "ecs" and st.cpfs is not None and st.checkpoint == "cpfs" and st.retain_on_destroy


def network_lifecycle(plan: Plan) -> Lifecycle:
    """The VPC: retained with a retained CPFS inside it (the file system cannot outlive its VPC)."""
    return retained(plan) if cpfs_retained(plan) else Lifecycle()


def services_vswitch_lifecycle(plan: Plan) -> Lifecycle:
    """The services vSwitch: retained with a retained CPFS in it; the node vSwitch never is."""
    return network_lifecycle(plan)


def protocol_service_lifecycle(plan: Plan) -> Lifecycle:
    return Lifecycle(delete_before_replace=True)


def data_disk_lifecycle(plan: Plan) -> Lifecycle:
    """The dataset cache disk: kept across a node replacement (re-attached), deleted on destroy."""
    return Lifecycle()


#: Every RAM policy trainstack writes rotates its versions (a custom policy keeps at most five:
#: ram.policy.max_versions; rotate_strategy deletes the oldest non-default one: ram.policy.rotate_strategy).
def ram_policy_rotate_strategy() -> str:
    return str(service_limits().value("ram.policy.rotate_strategy"))
