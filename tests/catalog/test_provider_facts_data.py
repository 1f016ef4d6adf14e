"""The generated provider facts: where they come from, that they say what the provider source
says for the arguments issue 16 names, and that trainstack's own dynamic providers behave as the
data claims (their real ``diff`` methods are called)."""

from __future__ import annotations

import importlib.metadata
import re

import pytest

from trainstack.catalog.provider_facts import load_provider_facts, normalize

INSTANCE = "alicloud:ecs/instance:Instance"
WHERE = re.compile(r"^alicloud/[\w./-]+\.go:\d+$")


@pytest.fixture(scope="module")
def facts():
    return load_provider_facts()


def test_the_data_names_the_provider_commit_and_the_sdk_it_was_matched_against(facts):
    p = facts.provider
    assert p.name == "terraform-provider-alicloud" and re.fullmatch(r"[0-9a-f]{40}", p.commit)
    assert p.version.startswith("v2.0.0") and p.ref == "release/v2"
    # regenerate (tools/provider_facts.py) when pulumi-alicloud is bumped
    assert p.bridged_by.version == importlib.metadata.version("pulumi-alicloud")
    assert facts.generated_by == "tools/provider_facts.py"
    assert p.link("alicloud/resource_alicloud_instance.go:245").endswith(
        f"/blob/{p.commit}/alicloud/resource_alicloud_instance.go#L245")


def test_every_fact_carries_a_provider_line(facts):
    for token, rf in facts.resources.items():
        assert WHERE.match(rf.schema_), token
        for key, arg in rf.arguments.items():
            assert WHERE.match(arg.source), (token, key)
            for where in arg.update or ():
                assert WHERE.match(where), (token, key, where)
        for e in rf.effects:
            assert e.sources and all(WHERE.match(s) for s in e.sources), (token, e)
            assert all(a == "*" or a in rf.arguments for a in e.arguments), (token, e)
        for d in rf.customize_diff:
            assert WHERE.match(d.where), (token, d)


def test_what_the_issue_found_wrong_reads_right_now(facts):
    inst = facts.resource(INSTANCE).arguments
    for forces in ("networkInterfaceTrafficMode", "queuePairNumber", "dataDisks.size", "dataDisks.category",
                   "networkInterfaces.vswitchId", "networkInterfaces.queuePairNumber", "spotStrategy",
                   "spotPriceLimit", "availabilityZone"):
        assert inst[forces].force_new, forces
    for not_forced in ("spotDuration", "vswitchId", "instanceType", "imageId", "userData"):
        assert not inst[not_forced].force_new, not_forced
    assert inst["spotDuration"].update == ()  # stored, never applied
    assert inst["vswitchId"].update and inst["userData"].update
    assert facts.resource("alicloud:nas/protocolService:ProtocolService").arguments["protocolThroughput"].force_new
    (decision,) = facts.resource(INSTANCE).customize_diff
    assert (decision.argument, decision.call) == ("imageId", "ForceNew")
    effects = {a: e.effect for e in facts.resource(INSTANCE).effects for a in e.arguments}
    assert effects["userData"] == effects["hostName"] == effects["password"] == "restart"
    assert effects["imageId"] == "wipe" and effects["instanceType"] == effects["vswitchId"] == "stop"


def test_inputs_the_sdk_has_but_the_source_read_lacks_are_listed_and_unused(facts):
    """The source read is a little older than what pulumi-alicloud 4.0.0 bridges: the gap is listed.
    An input trainstack sets inside it has no facts, so tests/components/test_provider_facts_coverage.py fails."""
    gap = {(t, a) for t, rf in facts.resources.items() for a in rf.sdk_inputs_not_in_schema}
    assert (INSTANCE, "instanceMetadataTags") in gap
    for token, rf in facts.resources.items():
        assert not rf.schema_inputs_not_in_sdk or token == "alicloud:oss/bucket:Bucket", (token, rf.schema_inputs_not_in_sdk)


def test_argument_lookup_maps_list_indices_map_keys_and_json_documents(facts):
    inst = facts.resource(INSTANCE)
    assert inst.argument("dataDisks[3].size")[0] == "dataDisks.size"
    assert inst.argument("tags.trainstack:role")[0] == "tags"           # a map: the key is data
    assert inst.argument("dataDisks[0].bogus") is None                   # a block lists its arguments
    assert facts.resource("alicloud:ram/policy:Policy").argument(
        "policyDocument(json).Statement[0].Action")[0] == "policyDocument"
    assert normalize("networkInterfaces[0].securityGroupIds") == "networkInterfaces.securityGroupIds"


def test_the_dlc_job_provider_replaces_what_the_data_says_and_deletes_first(facts):
    from components.dlc import DlcJobProvider
    from trainstack.dlc_job import KIND

    dyn = facts.dynamic(KIND)
    assert dyn.delete_before_replace
    provider = DlcJobProvider()
    olds = {k: f"old-{k}" for k in dyn.replace}
    for key in dyn.replace:
        result = provider.diff("job-1", olds, dict(olds, **{key: f"new-{key}"}))
        assert result.replaces == [key] and result.delete_before_replace, key
    for key in dyn.outputs:
        assert not provider.diff("job-1", olds, dict(olds, **{key: "x"})).changes, key


def test_the_cpfs_address_lookup_replaces_what_the_data_says(facts):
    from components.cpfs_export import _Provider

    dyn = facts.dynamic("cpfs-export-address")
    olds = {k: f"old-{k}" for k in (*dyn.replace, *dyn.not_compared, *dyn.outputs)}
    for key in dyn.replace:
        result = _Provider().diff("x", olds, dict(olds, **{key: "new"}))
        assert result.replaces == [key] and not result.delete_before_replace
    for key in (*dyn.not_compared, *dyn.outputs):
        assert not _Provider().diff("x", olds, dict(olds, **{key: "new"})).changes, key


def test_counts_per_type_stay_plausible(facts):
    """A parser regression shows as a type with no arguments or no ForceNew at all."""
    for token, rf in facts.resources.items():
        assert rf.arguments, token
        assert any(a.force_new for a in rf.arguments.values()), token
    assert len(facts.resource(INSTANCE).arguments) > 100


def test_docs_show_the_counts_of_the_committed_data(facts):
    import pathlib

    docs = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "preview.md").read_text(encoding="utf-8")
    for r in facts.counts():
        row = ("| `{type}` | `{terraform}` | {inputs} | {force_new} | {updated} | {resent} | {no_api_call} | "
               "{customize_diff} | {effects} |").format(**r)
        assert row in docs, row


def test_the_dynamic_provider_lines_point_at_their_diff_methods(facts):
    """Our own components move under other work; regenerate the facts when this fails."""
    import pathlib

    root = pathlib.Path(__file__).resolve().parents[2]
    for kind, dyn in facts.trainstack_providers.items():
        path, line = dyn.source.rsplit(":", 1)
        text = (root / path).read_text(encoding="utf-8").splitlines()[int(line) - 1]
        assert text.strip().startswith("def diff("), (kind, dyn.source, text)
