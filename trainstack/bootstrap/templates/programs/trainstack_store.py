"""trainstack node programs, shared: objects in OSS through Alibaba's SDK (alibabacloud-oss-v2).

Run with the OSS venv's Python (setup installs the SDK there from the VPC PyPI mirror); the SDK is
imported only when a store is made, so the image's python3 can import this module. Requests are
signed (V4) with the instance RAM role's STS credentials, on the region's internal endpoint. A boot
program (the node fetches its other programs with it).
"""

import calendar
import threading
import time

from trainstack_metadata import Metadata

PART_SIZE = 64 << 20  # multipart above this; the SDK grows it past 10000 parts


class StsCredentials(object):
    """The RAM role's credentials, read again every 5 minutes (the metadata service renews
    them long before they expire); thread-safe: the SDK signs from its transfer threads."""

    def __init__(self, metadata=None, clock=time.monotonic):
        self.metadata, self.clock = metadata or Metadata(), clock
        self.lock, self.creds, self.read_at = threading.Lock(), None, 0.0

    def get(self):
        with self.lock:
            if self.creds is None or self.clock() - self.read_at >= 300:
                self.creds, self.read_at = self.metadata.ram_credentials(), self.clock()
            return self.creds


class SdkStore(object):
    """list, get and put with Alibaba's OSS SDK, imported only here."""

    def __init__(self, region, endpoint, credentials):
        import alibabacloud_oss_v2 as oss

        def provide():
            c = credentials.get()
            return oss.Credentials(c["AccessKeyId"], c["AccessKeySecret"], c.get("SecurityToken") or None)

        cfg = oss.config.load_default()
        cfg.region, cfg.endpoint = region, endpoint
        cfg.credentials_provider = oss.credentials.CredentialsProviderFunc(provide)
        self.oss, self.client = oss, oss.Client(cfg)

    def list(self, bucket, prefix):  # [(key, size, LastModified epoch)], every page
        pages = self.client.list_objects_v2_paginator().iter_page(
            self.oss.ListObjectsV2Request(bucket=bucket, prefix=prefix))
        return [(o.key, int(o.size), calendar.timegm(o.last_modified.utctimetuple()))
                for page in pages for o in page.contents or ()]

    def get(self, bucket, key, path):  # ranged parts into a temporary file, then renamed (not the SDK's default)
        self.client.downloader(part_size=PART_SIZE, parallel_num=4, use_temp_file=True).download_file(
            self.oss.GetObjectRequest(bucket=bucket, key=key), path)

    def put(self, path, bucket, key):  # PutObject, or a multipart upload above PART_SIZE
        self.client.uploader(part_size=PART_SIZE, parallel_num=4).upload_file(
            self.oss.PutObjectRequest(bucket=bucket, key=key), path)


def sdk_store(region, endpoint):
    """The store every OSS command uses on a node (tests hand in their own factory instead)."""
    return SdkStore(region, endpoint, StsCredentials())


def split_uri(uri, folder=False):
    """oss://bucket[.endpoint]/key -> (bucket, key); a folder's key ends with / (or is empty)."""
    bucket, _, key = uri[6:].partition("/") if uri.startswith("oss://") else ("", "", "")
    if not bucket:
        raise ValueError("not oss://bucket/...: %r" % uri)
    return bucket.split(".")[0], key + "/" if folder and key and not key.endswith("/") else key
