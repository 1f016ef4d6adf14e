"""Tags every taggable resource must carry (advisory; the keys come from the policy config)."""

from __future__ import annotations

from typing import Iterator, Sequence

from ...catalog import Catalog
from ..policy_book import DEFAULT_REQUIRED_TAGS
from ..stack_view import Tagged
from . import Finding


def required_tags(items: Sequence[Tagged], settings: dict, cat: Catalog) -> Iterator[Finding]:
    wanted = settings.get("required_tags")
    wanted = list(DEFAULT_REQUIRED_TAGS) if wanted is None else wanted
    for item in items:
        have = item.tags
        missing = [k for k in wanted if k not in have or (isinstance(have[k], str) and not have[k].strip())]
        if missing:
            many = len(missing) > 1
            yield Finding(f"{item.resource}: missing tag{'s' if many else ''} {', '.join(missing)}: add "
                          f"{'them' if many else 'it'} to the resource's tags (profile tags apply to every resource)",
                          item.resource)
