"""The agent's OSS commands: checkpoint sync (new or changed files only), restore into an empty
directory, code downloads (trainstack_sync), the RAM role's STS credentials and the SDK store
(trainstack_store); the sync logic against a fake store, and the SDK calls themselves against a fake
OSS server where the SDK is installed."""

from __future__ import annotations

import ast
import json
import os
import sys
import time

import pytest
from fake_oss import DirStore, FakeOssServer
from plan_factory import single_gpu_lora_plan

from trainstack.bootstrap import render_files

URI = "oss://ckpt-bucket/checkpoints/"
BUCKET = "ckpt-bucket"


@pytest.fixture
def sync(programs):
    """The rendered trainstack_sync.py (conftest): the agent's code and checkpoint commands."""
    return programs.sync


@pytest.fixture
def store(tmp_path):
    return DirStore(tmp_path / "oss")


def write(path, text, mtime=None):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if mtime is not None:
        os.utime(path, (mtime, mtime))


def puts(store):
    return sorted(c["key"] for c in store.calls if c["op"] == "put")


def test_upload_sends_new_and_changed_files_only(sync, store, tmp_path):
    ckpt, state = tmp_path / "ckpt", str(tmp_path / "state" / "sync.json")
    write(ckpt / "step-100" / "model.pt", "weights-100")
    write(ckpt / "step-100" / "optim.pt", "optim-100")
    write(ckpt / "latest", "step-100")
    assert sync.upload_dir(store, str(ckpt), URI, state) == (3, 0)
    assert store.keys(BUCKET) == ["checkpoints/latest", "checkpoints/step-100/model.pt", "checkpoints/step-100/optim.pt"]
    assert store.read(BUCKET, "checkpoints/step-100/model.pt") == b"weights-100"

    store.calls.clear()
    assert sync.upload_dir(store, str(ckpt), URI, state) == (0, 3), "nothing changed: nothing sent"
    assert puts(store) == []

    store.calls.clear()
    write(ckpt / "step-200" / "model.pt", "weights-200")  # a new checkpoint
    write(ckpt / "latest", "step-200", mtime=time.time() + 1)  # same size, new content and mtime
    assert sync.upload_dir(store, str(ckpt), URI, state) == (2, 2)
    assert puts(store) == ["checkpoints/latest", "checkpoints/step-200/model.pt"]
    assert store.read(BUCKET, "checkpoints/latest") == b"step-200"


def test_a_node_without_a_record_uploads_only_what_is_newer_than_oss(sync, store, tmp_path):
    now = time.time()
    store.write(BUCKET, "checkpoints/a.pt", b"aaaa", mtime=now - 100)
    store.write(BUCKET, "checkpoints/b.pt", b"bbbb", mtime=now - 100)
    ckpt = tmp_path / "ckpt"
    write(ckpt / "a.pt", "aaaa", mtime=now - 200)  # older than the copy in OSS
    write(ckpt / "b.pt", "BBBB", mtime=now - 10)  # newer
    write(ckpt / "c.pt", "cc", mtime=now - 300)  # not in OSS at all
    assert sync.upload_dir(store, str(ckpt), URI, str(tmp_path / "sync.json")) == (2, 1)
    assert puts(store) == ["checkpoints/b.pt", "checkpoints/c.pt"]


def test_a_file_written_while_it_was_sent_is_sent_again(sync, store, tmp_path):
    ckpt, state = tmp_path / "ckpt", str(tmp_path / "sync.json")
    write(ckpt / "model.pt", "v1")
    real_put = store.put

    def put_while_the_trainer_writes(path, bucket, key):
        real_put(path, bucket, key)
        write(ckpt / "model.pt", "v2", mtime=time.time() + 5)

    store.put = put_while_the_trainer_writes
    assert sync.upload_dir(store, str(ckpt), URI, state) == (1, 0)
    store.put = real_put
    assert sync.upload_dir(store, str(ckpt), URI, state) == (1, 0)
    assert store.read(BUCKET, "checkpoints/model.pt") == b"v2"
    assert sync.upload_dir(store, str(ckpt), URI, state) == (0, 1)


def test_a_record_of_another_prefix_is_ignored(sync, store, tmp_path):
    ckpt, state = tmp_path / "ckpt", str(tmp_path / "sync.json")
    write(ckpt / "model.pt", "v1")
    assert sync.upload_dir(store, str(ckpt), "oss://ckpt-bucket/old/", state) == (1, 0)
    assert sync.upload_dir(store, str(ckpt), URI, state) == (1, 0)
    assert store.keys(BUCKET) == ["checkpoints/model.pt", "old/model.pt"]


def test_restore_fills_an_empty_directory_and_nothing_is_uploaded_back(sync, store, tmp_path):
    old = time.time() - 3600
    store.write(BUCKET, "checkpoints/step-100/model.pt", b"weights", mtime=old)
    store.write(BUCKET, "checkpoints/latest", b"step-100", mtime=old)
    store.write(BUCKET, "checkpoints/empty-folder/", b"")  # a folder marker, not a file
    store.write(BUCKET, "other/x", b"not ours")
    ckpt, state = tmp_path / "ckpt", str(tmp_path / "sync.json")
    assert sync.restore(store, URI, str(ckpt), state) == 2
    assert (ckpt / "step-100" / "model.pt").read_bytes() == b"weights"
    assert (ckpt / "latest").read_text() == "step-100"
    assert not (ckpt / "empty-folder").exists() and not (ckpt / "x").exists()
    assert abs((ckpt / "latest").stat().st_mtime - old) < 1, "a restored file is as old as its object"

    store.calls.clear()
    assert sync.upload_dir(store, str(ckpt), URI, state) == (0, 2)
    assert puts(store) == []


def test_restore_leaves_a_directory_that_holds_anything_alone(sync, store, tmp_path):
    store.write(BUCKET, "checkpoints/model.pt", b"from oss")
    ckpt = tmp_path / "ckpt"
    write(ckpt / "model.pt", "local")
    assert sync.restore(store, URI, str(ckpt), str(tmp_path / "sync.json")) == 0
    assert (ckpt / "model.pt").read_text() == "local"
    assert not [c for c in store.calls if c["op"] == "get"]


def test_restore_of_a_first_run_finds_nothing_and_succeeds(sync, store, tmp_path):
    assert sync.restore(store, URI, str(tmp_path / "ckpt"), str(tmp_path / "sync.json")) == 0
    assert os.listdir(tmp_path / "ckpt") == []


@pytest.mark.parametrize("key", ["checkpoints/../../etc/cron.d/x", "checkpoints//etc/passwd",
                                 "checkpoints/a/../../x", "checkpoints/./x"])
def test_an_object_key_that_would_leave_the_directory_is_refused(sync, store, tmp_path, key):
    store.write(BUCKET, key, b"evil")
    target = tmp_path / "deep" / "ckpt"
    with pytest.raises(ValueError, match="cannot be a local path"):
        sync.restore(store, URI, str(target), str(tmp_path / "sync.json"))
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.read_bytes() == b"evil"
               and "oss" not in p.relative_to(tmp_path).parts]
    assert written == []


DATASET = "oss://data-bucket/corpus/"


def gets(store):
    return sorted(c["key"] for c in store.calls if c["op"] == "get")


def test_the_dataset_copy_fetches_what_is_missing_or_different_and_resumes(sync, store, tmp_path):
    old = time.time() - 3600
    for name in ("shard-0.bin", "shard-1.bin", "sub/shard-2.bin"):
        store.write("data-bucket", f"corpus/{name}", name.encode(), mtime=old)
    store.write("data-bucket", "corpus/folder/", b"")
    dest = tmp_path / "data" / "dataset"
    done = dest / sync.MIRROR_DONE
    assert sync.mirror(store, DATASET, str(dest)) == (3, 0)
    assert (dest / "sub" / "shard-2.bin").read_bytes() == b"sub/shard-2.bin"
    assert json.loads(done.read_text()) == {"uri": DATASET, "objects": 3, "bytes": 37}

    # a reboot mid-copy: one file missing, one a torn copy (same size, its time never set)
    (dest / "shard-0.bin").unlink()
    write(dest / "shard-1.bin", "XXXXXXXXXXX")
    store.calls.clear()
    assert sync.mirror(store, DATASET, str(dest)) == (2, 1)
    assert gets(store) == ["corpus/shard-0.bin", "corpus/shard-1.bin"]
    assert (dest / "shard-1.bin").read_bytes() == b"shard-1.bin"

    store.calls.clear()  # nothing changed: nothing fetched, still complete
    assert sync.mirror(store, DATASET, str(dest)) == (0, 3) and gets(store) == [] and done.exists()

    store.write("data-bucket", "corpus/shard-0.bin", b"new shard 0", mtime=old + 60)  # changed in OSS
    (dest / "mine.txt").write_text("a file the trainer wrote")
    assert sync.mirror(store, DATASET, str(dest)) == (1, 2)
    assert (dest / "shard-0.bin").read_bytes() == b"new shard 0"
    assert (dest / "mine.txt").exists(), "the copy never deletes"


def test_an_interrupted_dataset_copy_is_not_marked_complete(sync, store, tmp_path):
    store.write("data-bucket", "corpus/a.bin", b"a")
    store.write("data-bucket", "corpus/b.bin", b"b")
    dest = tmp_path / "dataset"
    dest.mkdir()
    (dest / sync.MIRROR_DONE).write_text("{}")  # from an earlier, complete copy
    real_get = store.get

    def failing_get(bucket, key, path):
        if key.endswith("b.bin"):
            raise OSError("connection reset")
        real_get(bucket, key, path)

    store.get = failing_get
    with pytest.raises(OSError):
        sync.mirror(store, DATASET, str(dest))
    assert not (dest / sync.MIRROR_DONE).exists()


def test_a_dataset_key_that_would_leave_the_folder_or_take_trainstacks_names_is_left_out(sync, store, tmp_path,
                                                                                        capsys):
    store.write("data-bucket", "corpus/../../etc/x", b"evil")
    store.write("data-bucket", f"corpus/{sync.MIRROR_DONE}", b"a marker uploaded back from a node")
    store.write("data-bucket", f"corpus/{sync.MIRROR_LOCK}", b"")
    store.write("data-bucket", "corpus/shard.bin", b"data")
    dest = tmp_path / "dataset"
    assert sync.mirror(store, DATASET, str(dest)) == (1, 0)
    assert json.loads((dest / sync.MIRROR_DONE).read_text())["objects"] == 1
    assert (dest / "shard.bin").read_bytes() == b"data"
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.read_bytes() == b"evil"
               and "oss" not in p.relative_to(tmp_path).parts]
    assert written == []
    err = capsys.readouterr().err
    assert "cannot be a local path" in err and "trainstack's own name" in err
    assert sync.mirror(store, DATASET, str(dest)) == (0, 1), "left out, they never count as different"


def test_the_marker_is_gone_while_a_later_copy_runs(sync, store, tmp_path):
    store.write("data-bucket", "corpus/a.bin", b"a")
    dest = tmp_path / "dataset"
    sync.mirror(store, DATASET, str(dest))
    seen = []
    real_list = store.list

    def listing(bucket, prefix, **kw):
        seen.append((dest / sync.MIRROR_DONE).exists())
        return real_list(bucket, prefix, **kw)

    store.list = listing
    sync.mirror(store, DATASET, str(dest))
    assert seen == [False] and (dest / sync.MIRROR_DONE).exists()


def test_code_folder_and_file_downloads(sync, programs, store, tmp_path):
    store.write("code-bucket", "jobs/src/train.py", b"print('hi')\n")
    store.write("code-bucket", "jobs/src/pkg/util.py", b"X = 1\n")
    store.write("code-bucket", "jobs/srcx/other.py", b"not under jobs/src/")
    dest = tmp_path / "code"
    assert sync.download_dir(store, "oss://code-bucket/jobs/src/", str(dest)) == 2
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*.py")) == ["pkg/util.py", "train.py"]
    split = programs.store.split_uri
    assert split("oss://code-bucket.oss-cn-shenzhen-internal.aliyuncs.com/a/b") == ("code-bucket", "a/b")


def test_the_command_line_reports_failures_in_one_line(programs, store, tmp_path, capsys):
    ckpt = tmp_path / "ckpt"
    write(ckpt / "model.pt", "v1")
    args = ["--region", "cn-shenzhen", "--endpoint", "oss-cn-shenzhen-internal.aliyuncs.com"]
    seen = []

    def factory(region, endpoint):
        seen.append((region, endpoint))
        return store

    oss_main, state = programs.agent.oss_main, str(tmp_path / "s.json")
    assert oss_main(args + ["upload-dir", str(ckpt), URI, "--state", state], factory) == 0
    assert seen == [("cn-shenzhen", "oss-cn-shenzhen-internal.aliyuncs.com")]
    assert "1 files uploaded" in capsys.readouterr().err
    assert oss_main(args + ["mirror", URI, str(tmp_path / "dataset")], factory) == 0  # the dataset copy's line
    assert "1 files fetched, 0 already there" in capsys.readouterr().err
    assert (tmp_path / "dataset" / "model.pt").read_text() == "v1"

    def broken(region, endpoint):
        raise PermissionError("AccessDenied: the role may not read the bucket")

    assert oss_main(args + ["restore", URI, str(tmp_path / "r"), "--state", state], broken) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "restore" in err[0] and "AccessDenied" in err[0]
    assert oss_main(args + ["upload-dir", str(ckpt), URI], factory) == 1, "upload-dir needs --state"
    assert oss_main(["download", URI, "x"], factory) == 1
    assert programs.agent.main(["oss"] + args + ["nonsense", "a", "b"]) == 1


def test_sts_credentials_come_from_the_metadata_service_and_are_renewed(programs, fake_cloud):
    now = [1000.0]
    md = programs.metadata.Metadata(base=fake_cloud.url)
    creds = programs.store.StsCredentials(md, clock=lambda: now[0])
    first = creds.get()
    assert (first["AccessKeyId"], first["SecurityToken"]) == ("STS.fakeid", "sts-token/+=")
    creds.get()
    reads = [p for p, _ in fake_cloud.gets if p.endswith("TrainstackNodeRole")]
    assert len(reads) == 1, "cached between calls"
    now[0] += 301
    creds.get()
    assert len([p for p, _ in fake_cloud.gets if p.endswith("TrainstackNodeRole")]) == 2
    assert all(token for _, token in fake_cloud.gets)


def test_the_sdk_is_imported_only_by_the_store():
    """The node programs run on the image's python3 (3.6) without the SDK, importing nothing but the
    standard library and each other; the OSS commands run on the OSS venv's Python, where the boot
    installed it, and only trainstack_store imports it, when a store is made."""
    programs = {f.name: f.content for f in render_files(single_gpu_lora_plan(), 0)
                if f.program and f.name.startswith("trainstack_")}
    lazy = []
    for name, text in programs.items():
        tree = ast.parse(text, feature_version=(3, 6))
        top = {a.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for a in node.names}
        top |= {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom)}
        assert top <= set(sys.stdlib_module_names) | {n[:-3] for n in programs}, (name, top)
        lazy += [name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 and any(a.name == "alibabacloud_oss_v2" for a in node.names)]
    assert lazy == ["trainstack_store.py"]


def test_the_sdk_calls_work_against_an_oss_server(sync, programs, tmp_path, fake_cloud, monkeypatch):
    """Alibaba's SDK (alibabacloud-oss-v2) itself, against a local server speaking the OSS REST
    calls: paged listing, ranged downloads, PutObject and multipart upload, V4 signing with the
    RAM role's STS credentials (alibabacloud-oss-v2 is pinned in requirements.txt)."""
    monkeypatch.setenv("TRAINSTACK_METADATA_URL", fake_cloud.url)
    monkeypatch.setattr(programs.store, "PART_SIZE", 100 * 1024)  # small parts: multipart with a small file
    backing = DirStore(tmp_path / "server")
    for i in range(5):  # more than one list page
        backing.write(BUCKET, f"checkpoints/step-{i}/model.pt", os.urandom(1000 + i), time.time() - 600)
    backing.write(BUCKET, "checkpoints/a b+c&d.json", b"{}", time.time() - 600)
    big = os.urandom(350 * 1024 + 7)
    with FakeOssServer(backing) as server:
        store = programs.store.SdkStore("cn-shenzhen", server.endpoint, programs.store.StsCredentials())
        ckpt, state = tmp_path / "ckpt", str(tmp_path / "sync.json")
        assert sync.restore(store, URI, str(ckpt), state) == 6
        assert (ckpt / "a b+c&d.json").read_bytes() == b"{}"
        assert (ckpt / "step-4" / "model.pt").read_bytes() == backing.read(BUCKET, "checkpoints/step-4/model.pt")
        (ckpt / "big.pt").write_bytes(big)
        assert sync.upload_dir(store, str(ckpt), URI, state) == (1, 6)
        assert backing.read(BUCKET, "checkpoints/big.pt") == big
        (ckpt / "big.pt").unlink()
        store.get(BUCKET, "checkpoints/big.pt", str(ckpt / "big.pt"))  # ranged parts, CRC checked
        assert (ckpt / "big.pt").read_bytes() == big
        # a download torn half-way (the second part refused) leaves the old copy whole: the SDK writes a
        # temporary file and renames it only once complete (use_temp_file; its default writes in place)
        (ckpt / "big.pt").write_bytes(b"the old copy")
        server.refuse_ranges_from = 100 * 1024
        with pytest.raises(Exception):
            store.get(BUCKET, "checkpoints/big.pt", str(ckpt / "big.pt"))
        assert (ckpt / "big.pt").read_bytes() == b"the old copy"
        server.refuse_ranges_from = None
        store.get(BUCKET, "checkpoints/big.pt", str(ckpt / "big.pt"))
        assert (ckpt / "big.pt").read_bytes() == big
        requests = server.requests
    big_ops = [(r["method"], sorted(r["query"])) for r in requests if r["key"] == "checkpoints/big.pt"]
    assert big_ops[0] == ("POST", ["encoding-type", "uploads"]) and ("PUT", ["partNumber", "uploadId"]) in big_ops
    assert len([r for r in requests if r["query"].get("list-type") == "2"]) >= 3 * 2, "paged listing"
    assert any(r["headers"].get("Range") for r in requests if r["method"] == "GET")
    for r in requests:
        assert r["headers"]["x-oss-security-token"] == "sts-token/+="
        assert r["headers"]["Authorization"].startswith(
            "OSS4-HMAC-SHA256 Credential=STS.fakeid/") and "/cn-shenzhen/oss/aliyun_v4_request" in r["headers"][
            "Authorization"]
        assert "fake-secret" not in json.dumps(r)
