"""Read a YAML data file that ships with trainstack (catalog, presets, launcher options), fast.

Packaged data is trusted and can be large, so it goes through libyaml's safe loader when PyYAML
has it (several times faster than the pure-Python one). User files are read by
``trainstack.profile.yamlfile`` instead: bounded, duplicate keys refused.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_data_yaml(path: Path) -> Any:
    with Path(path).open(encoding="utf-8") as fh:
        return yaml.load(fh, Loader=_LOADER)  # noqa: S506 - a safe loader
