"""Cloud adapters: every Alibaba Cloud OpenAPI call trainstack makes, through the official SDKs.

One credentials chain (``credentials.py``), one retry policy (``retry.py``), one table from API
error to fix (``errors.py``). The pure core never imports this package; components, the preview
and the CLI do.
"""
