"""Compatibility: the model shapes now live in :mod:`trainstack.models`."""

from .models import Architecture, Preset, VisionTower, derive_architecture, find_preset, presets  # noqa: F401

__all__ = ["Architecture", "Preset", "VisionTower", "derive_architecture", "find_preset", "presets"]
