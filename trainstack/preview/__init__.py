"""The offline preview: `trainstack plan` and `trainstack diff` without a cloud or the Pulumi CLI.

engine.py   runs the real Pulumi program in-process under a recording mock engine
cloud.py    the offline stand-in answers (zones, images, ids, computed outputs)
values.py   recorded values: secrets kept marked, redaction, long strings shortened
sources.py  Pulumi project, stack config, and what a plan/diff side names
planner.py  source -> Plan -> recording -> policy verdicts -> the plan document
render.py   the plan document as text, markdown or JSON; topology.py the diagram
diff.py     two plan documents compared; change_rules.py what `pulumi up` does with one changed
            input (provider facts + lifecycle options); render_diff.py as markdown or JSON
ci.py       what the GitHub workflows run (affected stacks, the sticky PR comment)

See docs/preview.md.
"""
