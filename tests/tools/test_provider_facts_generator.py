"""tools/provider_facts.py reads Go source it did not write: its bracket matching, schema reading,
update-path and CustomizeDiff scanning, checked on small provider-shaped files (the real run needs
the provider repository, which CI does not have; its output is tests/catalog/test_provider_facts_data.py's)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("provider_facts_tool", ROOT / "tools" / "provider_facts.py")
tool = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = tool  # dataclasses look their module up
spec.loader.exec_module(tool)

RESOURCE = '''package alicloud

// a comment with a brace { and a string "}"
func resourceAliCloudVpcVswitch() *schema.Resource {
	return &schema.Resource{
		Create: resourceAliCloudVpcVswitchCreate,
		Update: resourceAliCloudVpcVswitchUpdate,
		Delete: resourceAliCloudVpcVswitchDelete,
		CustomizeDiff: vswitchDiff,
		Schema: map[string]*schema.Schema{
			"cidr_block": {
				Type:     schema.TypeString,
				Required: true,
				ForceNew: true,
			},
			"vswitch_name": {
				Type:             schema.TypeString,
				Optional:         true,
				DiffSuppressFunc: func(k, old, new string, d *schema.ResourceData) bool {
					return d.Get("description") == "{"
				},
			},
			"tags": tagsSchema(),
			"route": {
				Type:     schema.TypeList,
				Optional: true,
				ForceNew: true,
				Elem: &schema.Resource{
					Schema: map[string]*schema.Schema{
						"next_hop": {Type: schema.TypeString, Optional: true},
					},
				},
			},
			"zone_id": {
				Type:     schema.TypeString,
				Optional: true,
				Removed:  "gone",
			},
			"status": {
				Type:     schema.TypeString,
				Computed: true,
			},
		},
	}
}

func resourceAliCloudVpcVswitchUpdate(d *schema.ResourceData, meta interface{}) error {
	if d.HasChange("vswitch_name") {
		update = true
	}
	return renameHelper(d)
}

func renameHelper(d *schema.ResourceData) error {
	if d.HasChanges("tags", "not_an_argument") {
		return nil
	}
	return nil
}

func resourceAliCloudVpcVswitchCreate(d *schema.ResourceData, meta interface{}) error {
	d.HasChange("cidr_block") // create-only: not an update check
	return nil
}

func vswitchDiff(ctx context.Context, diff *schema.ResourceDiff, meta interface{}) error {
	return diff.ForceNew("vswitch_name")
}
'''
TAGS = '''package alicloud

func tagsSchema() *schema.Schema {
	return &schema.Schema{
		Type:     schema.TypeMap,
		Optional: true,
	}
}
'''
PROVIDER = '''package alicloud

func Provider() {
	ResourcesMap: map[string]*schema.Resource{
			"alicloud_vswitch":  resourceAliCloudVpcVswitch(),
	}
}
'''


def line_of(snippet: str) -> str:
    return f"alicloud/resource_alicloud_vswitch.go:{RESOURCE[:RESOURCE.index(snippet)].count(chr(10)) + 1}"


@pytest.fixture(scope="module")
def pkg():
    return tool.GoPackage({"alicloud/resource_alicloud_vswitch.go": RESOURCE, "alicloud/tags.go": TAGS,
                           "alicloud/provider.go": PROVIDER})


def test_brackets_match_across_strings_runes_and_comments():
    text = 'f({ "}" , \'}\', `}` /* } */ // }\n })'
    assert tool.matching(text, 1) == len(text) - 1
    items = "a, f(b, c), {d, e}"
    assert [items[a:b].strip() for a, b in tool.split_top(items, 0, len(items))] == ["a", "f(b, c)", "{d, e}"]


def test_functions_and_the_resources_map_are_indexed(pkg):
    assert {"resourceAliCloudVpcVswitch", "renameHelper", "tagsSchema"} <= set(pkg.funcs)
    assert tool.resources_map(pkg) == {"alicloud_vswitch": "resourceAliCloudVpcVswitch"}


def test_schema_entries_nested_blocks_helpers_and_lines(pkg):
    reader = tool.SchemaReader(pkg)
    fn, res = reader.resource("resourceAliCloudVpcVswitch")
    args = {".".join(a.path): a for a in reader.args(*reader.schema_map(fn.file, *res["Schema"]))}
    assert set(args) == {"cidr_block", "vswitch_name", "tags", "route", "route.next_hop", "zone_id", "status"}
    assert args["cidr_block"].force_new and not args["vswitch_name"].force_new
    assert args["route.next_hop"].force_new  # inherits the block's ForceNew
    assert args["route"].block and tool._type(args["tags"]) == "map"
    assert args["cidr_block"].where == line_of('"cidr_block"')
    assert "Removed" in args["zone_id"].fields


def test_update_checks_follow_helpers_and_skip_create(pkg):
    checks = tool.update_checks(pkg, "resourceAliCloudVpcVswitchUpdate", {"resourceAliCloudVpcVswitchCreate"},
                                {"cidr_block", "vswitch_name", "tags", "route"})
    assert set(checks) == {"vswitch_name", "tags"}  # not_an_argument dropped, Create not an update
    assert checks["tags"] == [line_of('d.HasChanges("tags"')]


def test_customize_diff_and_suppression(pkg):
    fn = pkg.funcs["resourceAliCloudVpcVswitch"]
    (d,) = tool.customize_diff(pkg, fn.file, "vswitchDiff", 0)
    assert (d["argument"], d["call"], d["function"]) == ("vswitch_name", "ForceNew", "vswitchDiff")
    reader = tool.SchemaReader(pkg)
    _, res = reader.resource("resourceAliCloudVpcVswitch")
    args = {a.path[0]: a for a in reader.args(*reader.schema_map(fn.file, *res["Schema"]))}
    s = tool.suppression(pkg, args["vswitch_name"])
    assert s["function"] == "(inline)" and s["reads"] == ["description"]


def test_a_vanished_anchor_stops_the_run(pkg):
    assert tool.anchor_line(pkg, ("renameHelper", r'HasChanges\("tags"')) == line_of('d.HasChanges("tags"')
    with pytest.raises(SystemExit, match="re-read the provider source"):
        tool.anchor_line(pkg, ("renameHelper", r"StopInstance"))


def test_pulumi_names_come_from_the_installed_sdk():
    names, version = tool.sdk_names("alicloud:ecs/instance:Instance")
    assert names[("data_disks", "performance_level")] == "dataDisks.performanceLevel"
    assert tool._sdk_wire(names, ("network_interfaces", "vswitch_id")) == "networkInterfaces.vswitchId"
    bucket, _ = tool.sdk_names("alicloud:oss/bucket:Bucket")
    assert tool._sdk_wire(bucket, ("cors_rule", "allowed_origins")) == "corsRules.allowedOrigins"  # plural list
    assert version


def test_token_mapping_is_checked_against_resources_go():
    text = '\t\t\t"alicloud_vswitch":                      {Tok: resource(vpcMod, "Switch")},\n'
    assert tool.token_source(text, "alicloud:vpc/switch:Switch", "alicloud_vswitch") == "provider/resources.go:1"
    with pytest.raises(SystemExit, match="maps it to"):
        tool.token_source(text, "alicloud:vpc/network:Network", "alicloud_vswitch")
    assert tool.token_source(None, "alicloud:nas/protocolService:ProtocolService",
                             "alicloud_nas_protocol_service").startswith("module rule")


def test_an_impossible_update_fact_gets_wire_names_and_its_anchored_line(pkg):
    fact = tool.Impossible("vswitch_name", "not_smaller", "ModifyVSwitchAttribute", "why", "fix",
                           (("resourceAliCloudVpcVswitchUpdate", r'd\.HasChange\("vswitch_name"\)'),),
                           ("https://example.invalid/doc",), only_when=(("cidr_block", ("10.0.0.0/8",)),))
    wire_of = {"vswitch_name": "vswitchName", "cidr_block": "cidrBlock"}
    item = tool.impossible_entry(pkg, "alicloud:vpc/switch:Switch", wire_of, fact)
    assert item["argument"] == "vswitchName" and item["only_when"] == {"cidrBlock": ["10.0.0.0/8"]}
    assert item["sources"] == [line_of('d.HasChange("vswitch_name")')] and item["docs"] == ["https://example.invalid/doc"]
    with pytest.raises(SystemExit, match="unknown arguments"):
        tool.impossible_entry(pkg, "alicloud:vpc/switch:Switch", {"cidr_block": "cidrBlock"}, fact)
    gone = tool.Impossible("vswitch_name", "not_smaller", "X", "why", "fix",
                           (("resourceAliCloudVpcVswitchUpdate", r"ResizeDisk\("),), ())
    with pytest.raises(SystemExit, match="re-read the provider source"):
        tool.impossible_entry(pkg, "alicloud:vpc/switch:Switch", wire_of, gone)


def test_every_impossible_fact_names_an_argument_the_generated_data_has():
    """The committed data carries each hand-checked fact once, under its wire name, with a line and a doc."""
    from trainstack.catalog.provider_facts import load_provider_facts

    facts = load_provider_facts()
    for token, items in tool.IMPOSSIBLE.items():
        rf = facts.resource(token)
        got = {(i.argument, i.rule) for i in rf.impossible_updates}
        assert len(got) == len(items), token
        for i in rf.impossible_updates:
            assert i.argument in rf.arguments and not rf.arguments[i.argument].force_new, (token, i.argument)
            assert i.sources and all(s.startswith("alicloud/") for s in i.sources) and i.docs
