"""trainstack: size, resolve, provision and police GPU training jobs on Alibaba Cloud."""

__version__ = "0.1.0"
