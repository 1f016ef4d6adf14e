"""The resolver's public entry points; the engine and its strategies live in :mod:`trainstack.placement`."""

from .placement import SPOT_RESTART_ALLOWANCE, Resolution, considered, rank_key, resolve, resolve_all, wants_dlc

__all__ = ["Resolution", "SPOT_RESTART_ALLOWANCE", "considered", "rank_key", "resolve", "resolve_all", "wants_dlc"]
