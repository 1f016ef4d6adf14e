"""The catalog's own error: its data files are inconsistent (a bug in data, exit 2)."""

from __future__ import annotations

from ..errors import TrainstackError


class CatalogError(TrainstackError):
    """The catalog data itself is inconsistent (a bug in data files, exit 2)."""
