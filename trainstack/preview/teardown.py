"""Teardown with retained storage: does one ``pulumi destroy`` complete?

A resource kept by ``pulumi destroy`` (``protect`` or ``retain_on_delete``: checkpoint storage) must
not depend on a cloud resource that the same destroy deletes: the deletion would fail for as long as
the kept resource sits in it (a retained CPFS in the cluster's vSwitch makes the vSwitch deletion
fail after its timeout). An object kept in a bucket that destroy deletes with ``force_destroy`` does
not pin it: the provider deletes every object version and delete marker, then the bucket
(terraform-provider-alicloud ace5bcf8, alicloud/resource_alicloud_oss_bucket.go:1719-1773, on
BucketNotEmpty). Pure, over a plan document (``trainstack plan --format json``): the dependencies
Pulumi records (explicit ``depends_on`` and every resource an input refers to).
"""

from __future__ import annotations

from typing import Any


def kept(r: dict[str, Any]) -> bool:
    return bool(r.get("protect") or r.get("retain_on_delete"))


def emptied_with(r: dict[str, Any], dep: dict[str, Any]) -> bool:
    """``r`` is an object in the bucket ``dep``, which its deletion empties first (force_destroy)."""
    return (r["type"] == "alicloud:oss/bucketObject:BucketObject" and dep["type"] == "alicloud:oss/bucket:Bucket"
            and (dep.get("inputs") or {}).get("forceDestroy") is True)


def pinned_deletions(doc: dict[str, Any]) -> list[str]:
    """One line per (kept resource, deleted cloud resource it depends on); empty when teardown completes."""
    by_urn = {r["urn"]: r for r in doc.get("resources") or [] if r.get("urn")}
    out = []
    for r in by_urn.values():
        if not r.get("custom") or not kept(r):
            continue
        for urn in r.get("dependencies") or []:
            dep = by_urn.get(urn)
            if dep is None or not dep.get("custom") or dep["type"].startswith("pulumi:providers:") or kept(dep) \
                    or emptied_with(r, dep):
                continue
            out.append(f"`{r['name']}` ({r['type']}) is kept by `pulumi destroy` but depends on `{dep['name']}` "
                       f"({dep['type']}), which the same destroy deletes: that deletion fails while it is in use")
    return sorted(out)
