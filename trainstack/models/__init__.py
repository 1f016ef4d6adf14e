"""Model shapes: the architecture (dense, MoE, vision tower), named presets, and HF config.json files."""

from .architecture import HF_ALIASES, Architecture, VisionTower
from .hf_config import HfConfigError, architecture_from_hf, load_hf_config, supported_model_types
from .presets import Preset, PublishedCount, derive_architecture, find_preset, normalize, preset_names, presets

__all__ = [
    "Architecture", "HF_ALIASES", "HfConfigError", "Preset", "PublishedCount", "VisionTower", "architecture_from_hf",
    "derive_architecture", "find_preset", "load_hf_config", "normalize", "preset_names", "presets",
    "supported_model_types",
]
