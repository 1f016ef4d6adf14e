"""Sizing sits above the profile: the profile's validator reaches the degree rules in
trainstack/parallel_degrees.py, never trainstack.sizing, so no import (annotations included) runs
from the profile package back into sizing."""

from __future__ import annotations

import pathlib
import sys

import grimp
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def graph():
    sys.path.insert(0, str(ROOT))
    # TYPE_CHECKING imports count: a type-only edge back is still a circle in the design
    return grimp.build_graph("trainstack", include_external_packages=False, exclude_type_checking_imports=False,
                             cache_dir=None)


def test_the_profile_package_imports_nothing_of_sizing(graph):
    assert graph.find_shortest_chain(importer="trainstack.profile", imported="trainstack.sizing",
                                     as_packages=True) is None


def test_the_degree_rules_import_neither_profile_nor_sizing(graph):
    for above in ("trainstack.profile", "trainstack.sizing", "trainstack.placement"):
        assert graph.find_shortest_chain(importer="trainstack.parallel_degrees", imported=above,
                                         as_packages=True) is None, above


def test_sizing_and_the_profile_validator_share_one_rule_book():
    from trainstack import parallel_degrees
    from trainstack.sizing import frameworks, parallel

    assert parallel.Layout is parallel_degrees.Layout
    assert parallel.layout_problems is parallel_degrees.layout_problems
    assert frameworks.unsupported_degrees is parallel_degrees.unsupported_degrees
    assert frameworks.PARALLEL_DEGREES is parallel_degrees.PARALLEL_DEGREES
