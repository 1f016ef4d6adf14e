"""Pulumi components that translate a trainstack Plan into Alibaba Cloud resources."""

from .stack import TrainingStack

__all__ = ["TrainingStack"]
