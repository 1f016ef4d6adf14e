"""Fakes for the OSS side of the node programs (templates/programs/: the agent's ``oss`` commands,
the heartbeat, the programs installer).

- ``DirStore``: the agent's store interface (list/get/put) over a local directory, one file
  per object; injected in place of the SDK-backed store, in-process or from bash through
  ``oss_python_wrapper``.
- ``FakeOssServer``: a local http.server that speaks the few OSS REST calls Alibaba's SDK
  (alibabacloud-oss-v2) makes for them (ListObjectsV2, HeadObject, GetObject with ranges,
  PutObject, multipart upload), path-style as the SDK addresses an IP endpoint, with the
  CRC-64 header the SDK verifies. It records each request's headers, to check the signing.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import os
import shutil
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator, Optional
from xml.sax.saxutils import escape


class DirStore:
    """Objects as files ``root/<bucket>/<quoted key>``; an object's mtime is its LastModified."""

    def __init__(self, root: str | os.PathLike, log: Optional[str] = None, **context: str) -> None:
        self.root = Path(root)
        self.log_path = log
        self.calls: list[dict] = []
        self.context = context  # e.g. the region and endpoint the helper asked for

    def _record(self, op: str, **data: object) -> None:
        call = dict(op=op, **data, **self.context)
        self.calls.append(call)
        if self.log_path:
            with open(self.log_path, "a") as fh:
                fh.write(json.dumps(call) + "\n")

    def _file(self, bucket: str, key: str) -> Path:
        return self.root / bucket / urllib.parse.quote(key, safe="")

    # test helpers
    def write(self, bucket: str, key: str, data: bytes, mtime: Optional[float] = None) -> None:
        path = self._file(bucket, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if mtime is not None:
            os.utime(path, (mtime, mtime))

    def delete(self, bucket: str, key: str) -> None:
        self._file(bucket, key).unlink()

    def read(self, bucket: str, key: str) -> bytes:
        return self._file(bucket, key).read_bytes()

    def keys(self, bucket: str) -> list[str]:
        return [key for key, _, _ in self.list(bucket, "", record=False)]

    def stat(self, bucket: str, key: str) -> os.stat_result:
        return self._file(bucket, key).stat()

    # the store interface of the agent's oss commands
    def list(self, bucket: str, prefix: str, record: bool = True) -> Iterator[tuple[str, int, float]]:
        if record:
            self._record("list", bucket=bucket, prefix=prefix)
        directory = self.root / bucket
        names = sorted(os.listdir(directory)) if directory.is_dir() else []
        for name in names:
            key = urllib.parse.unquote(name)
            if key.startswith(prefix):
                st = (directory / name).stat()
                yield key, st.st_size, st.st_mtime

    def get(self, bucket: str, key: str, path: str) -> None:
        self._record("get", bucket=bucket, key=key, path=str(path))
        source = self._file(bucket, key)
        if not source.is_file():
            raise FileNotFoundError(f"NoSuchKey: oss://{bucket}/{key}")
        shutil.copyfile(source, path)

    def put(self, path: str, bucket: str, key: str) -> None:
        self._record("put", bucket=bucket, key=key, path=str(path))
        target = self._file(bucket, key)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)  # mtime: now, as OSS sets LastModified


def oss_python_wrapper(path: Path) -> Path:
    """A stand-in for the OSS venv's python: runs the real node program argv[1] (the agent's ``oss``
    commands, the heartbeat, the programs installer) with a DirStore at $FAKE_OSS_ROOT that logs each
    call to $FAKE_OSS_LOG. $FAKE_OSS_FAIL makes the agent's data commands and the heartbeat fail as a
    role without access would (the job settings and the programs still come through)."""
    path.write_text(
        f"#!{sys.executable}\n"
        "import importlib, os, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import fake_oss\n"
        "sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[1])))\n"
        "program = os.path.basename(sys.argv[1])[:-3]\n"
        "module = importlib.import_module(program)\n"
        "data = program == 'trainstack_heartbeat' or (program == 'trainstack_agent' and sys.argv[7:8] != ['job-settings'])\n"
        "if os.environ.get('FAKE_OSS_FAIL') and data:\n"
        "    def factory(region, endpoint):\n"
        "        raise PermissionError(os.environ['FAKE_OSS_FAIL'])\n"
        "else:\n"
        "    def factory(region, endpoint):\n"
        "        return fake_oss.DirStore(os.environ['FAKE_OSS_ROOT'], log=os.environ['FAKE_OSS_LOG'],\n"
        "                                 region=region, endpoint=endpoint)\n"
        "if program == 'trainstack_agent':\n"
        "    assert sys.argv[2] == 'oss', sys.argv\n"
        "    sys.exit(module.oss_main(sys.argv[3:], store_factory=factory))\n"
        "main = module.heartbeat_main if program == 'trainstack_heartbeat' else module.main\n"
        "sys.exit(main(sys.argv[2:], store_factory=factory))\n")
    path.chmod(0o755)
    return path


def crc64(data: bytes) -> str:
    """OSS's CRC-64/ECMA (x-oss-hash-crc64ecma), as the SDK computes it."""
    import crcmod  # ships with alibabacloud-oss-v2 (crcmod-plus)

    crc = crcmod.Crc(0x142F0E1EBA9EA3693, initCrc=0, xorOut=0xFFFFFFFFFFFFFFFF)
    crc.update(data)
    return str(crc.crcValue)


class FakeOssServer:
    """Path-style OSS on 127.0.0.1 over a DirStore. ``page_size`` keys per ListObjectsV2 page,
    so the SDK's paginator has to follow continuation tokens."""

    def __init__(self, store: DirStore, page_size: int = 2) -> None:
        self.store = store
        self.page_size = page_size
        self.requests: list[dict] = []
        self.uploads: dict[str, dict[int, bytes]] = {}  # upload id -> part number -> data
        self.refuse_ranges_from: Optional[int] = None  # ranged reads starting there answer 403 (a download torn)
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "FakeOssServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _target(self) -> tuple[str, str, dict[str, str]]:
                url = urllib.parse.urlsplit(self.path)
                bucket, _, key = url.path.lstrip("/").partition("/")
                query = dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))
                with fake.lock:
                    fake.requests.append({"method": self.command, "bucket": bucket, "key": urllib.parse.unquote(key),
                                          "query": query, "headers": dict(self.headers.items())})
                return bucket, urllib.parse.unquote(key), query

            def _send(self, status: int, body: bytes = b"", headers: Optional[dict[str, str]] = None) -> None:
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("x-oss-request-id", "fake-request")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def _error(self, status: int, code: str) -> None:
                body = (f"<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{code}</Code>"
                        f"<Message>{code}</Message><RequestId>fake-request</RequestId></Error>").encode()
                self._send(status, body, {"Content-Type": "application/xml"})

            def _object_headers(self, data: bytes, mtime: float) -> dict[str, str]:
                return {"ETag": '"%s"' % hashlib.md5(data).hexdigest().upper(),
                        "Last-Modified": email.utils.formatdate(mtime, usegmt=True),
                        "Content-Type": "application/octet-stream", "x-oss-object-type": "Normal",
                        "x-oss-hash-crc64ecma": crc64(data), "Accept-Ranges": "bytes"}

            def _load(self, bucket: str, key: str) -> Optional[tuple[bytes, float]]:
                try:
                    return fake.store.read(bucket, key), fake.store.stat(bucket, key).st_mtime
                except FileNotFoundError:
                    return None

            def do_HEAD(self) -> None:  # noqa: N802
                bucket, key, _ = self._target()
                found = self._load(bucket, key)
                if found is None:
                    return self._send(404)
                data, mtime = found
                headers = self._object_headers(data, mtime)
                self.send_response(200)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                bucket, key, query = self._target()
                if not key:
                    return self._list(bucket, query)
                found = self._load(bucket, key)
                if found is None:
                    return self._error(404, "NoSuchKey")
                data, mtime = found
                headers = self._object_headers(data, mtime)
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    first, _, last = rng[len("bytes="):].partition("-")
                    start, end = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
                    if fake.refuse_ranges_from is not None and start >= fake.refuse_ranges_from:
                        return self._error(403, "AccessDenied")
                    headers["Content-Range"] = f"bytes {start}-{end}/{len(data)}"
                    return self._send(206, data[start:end + 1], headers)
                self._send(200, data, headers)

            def _body(self) -> bytes:
                return self.rfile.read(int(self.headers.get("Content-Length", "0")))

            def do_PUT(self) -> None:  # noqa: N802
                bucket, key, query = self._target()
                data = self._body()
                tags = {"ETag": '"%s"' % hashlib.md5(data).hexdigest().upper(), "x-oss-hash-crc64ecma": crc64(data)}
                if "uploadId" in query:  # UploadPart
                    with fake.lock:
                        parts = fake.uploads.get(query["uploadId"])
                        if parts is None:
                            return self._error(404, "NoSuchUpload")
                        parts[int(query["partNumber"])] = data
                    return self._send(200, b"", tags)
                fake.store.write(bucket, key, data, time.time())  # PutObject
                self._send(200, b"", tags)

            def do_POST(self) -> None:  # noqa: N802
                bucket, key, query = self._target()
                self._body()
                if "uploads" in query:  # InitiateMultipartUpload
                    with fake.lock:
                        upload_id = f"upload-{len(fake.uploads)}"
                        fake.uploads[upload_id] = {}
                    body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><InitiateMultipartUploadResult>"
                            f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(urllib.parse.quote(key, safe='/'))}</Key>"
                            f"<UploadId>{upload_id}</UploadId><EncodingType>url</EncodingType>"
                            "</InitiateMultipartUploadResult>").encode()
                    return self._send(200, body, {"Content-Type": "application/xml"})
                if "uploadId" in query:  # CompleteMultipartUpload (parts in order, as the SDK sends)
                    with fake.lock:
                        parts = fake.uploads.pop(query["uploadId"], None)
                    if parts is None:
                        return self._error(404, "NoSuchUpload")
                    data = b"".join(parts[n] for n in sorted(parts))
                    fake.store.write(bucket, key, data, time.time())
                    body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><CompleteMultipartUploadResult>"
                            f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(urllib.parse.quote(key, safe='/'))}</Key>"
                            "<ETag>\"M\"</ETag><EncodingType>url</EncodingType></CompleteMultipartUploadResult>"
                            ).encode()
                    return self._send(200, body, {"Content-Type": "application/xml", "x-oss-hash-crc64ecma": crc64(data)})
                self._error(400, "InvalidArgument")

            def do_DELETE(self) -> None:  # noqa: N802
                _, _, query = self._target()
                with fake.lock:
                    fake.uploads.pop(query.get("uploadId", ""), None)  # AbortMultipartUpload
                self._send(204)

            def _list(self, bucket: str, query: dict[str, str]) -> None:
                if query.get("list-type") != "2":
                    return self._error(400, "InvalidArgument")
                prefix = query.get("prefix", "")
                items = list(fake.store.list(bucket, prefix, record=False))
                start = int(query.get("continuation-token") or 0)
                page = items[start:start + fake.page_size]
                truncated = start + fake.page_size < len(items)
                url = query.get("encoding-type") == "url"

                def enc(text: str) -> str:
                    return escape(urllib.parse.quote(text, safe="/") if url else text)

                contents = "".join(
                    f"<Contents><Key>{enc(key)}</Key><LastModified>"
                    f"{time.strftime('%Y-%m-%dT%H:%M:%S', time.gmtime(mtime))}.000Z</LastModified>"
                    f"<ETag>\"X\"</ETag><Type>Normal</Type><Size>{size}</Size>"
                    f"<StorageClass>Standard</StorageClass></Contents>" for key, size, mtime in page)
                body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?><ListBucketResult>"
                        f"<Name>{escape(bucket)}</Name><Prefix>{enc(prefix)}</Prefix>"
                        f"<MaxKeys>{fake.page_size}</MaxKeys>{'<EncodingType>url</EncodingType>' if url else ''}"
                        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>"
                        + (f"<NextContinuationToken>{start + fake.page_size}</NextContinuationToken>"
                           if truncated else "")
                        + f"<KeyCount>{len(page)}</KeyCount>{contents}</ListBucketResult>").encode()
                self._send(200, body, {"Content-Type": "application/xml"})

        return Handler
