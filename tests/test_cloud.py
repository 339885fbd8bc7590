"""Recordings in object storage: FsspecStorage and push, against moto's real S3 API on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import zlib

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import FormatError, RecordingReader, RecordingWrapper
from gym_recorder.errors import StorageError
from gym_recorder.training.transitions import transitions
from needs import need_module
from services import free_port

from conftest import ROOT, record_cartpole


def _cloud():
    need_module("fsspec", 'pip install ".[cloud]"')
    from gym_recorder.integrations import cloud

    return cloud


def record_images(directory, episodes=3, size=32, length=40, target=60_000):
    from sample_envs.envs import ImageEnv

    env = RecordingWrapper(ImageEnv(height=size, width=size, episode_length=length), directory,
                           target_batch_bytes=target)
    for e in range(episodes):
        env.reset(seed=100 + e)
        for t in range(length):
            env.step(t % 4)
    env.close()


def local_files(directory):
    return {n: os.path.getsize(os.path.join(directory, n)) for n in os.listdir(directory)}


def test_storage_reads_ranges_and_json(s3, tmp_path):
    cloud = _cloud()
    d = tmp_path / "rec"
    record_images(d)
    result = cloud.push(d, s3.url("rec"))
    assert result.uploaded == len([n for n in os.listdir(d) if ".ep" in n])
    storage = cloud.FsspecStorage(s3.url("rec"), s3.options)
    assert storage.list() == sorted(os.listdir(d))
    bin_name = sorted(n for n in os.listdir(d) if n.endswith(".bin"))[0]
    local = (d / bin_name).read_bytes()
    assert storage.size(bin_name) == len(local)
    before = storage.bytes_read
    assert storage.read_range(bin_name, 8, 1000) == local[8:1008]
    out = bytearray(512)
    storage.readinto(bin_name, 64, memoryview(out))
    assert bytes(out) == local[64:576]
    assert storage.bytes_read - before == 1512  # ranges only, never the whole object
    manifest = [n for n in os.listdir(d) if n.endswith(".manifest.json")][0]
    assert storage.read_bytes(manifest, 1 << 20) == (d / manifest).read_bytes()
    with pytest.raises(FormatError, match="more than 10 bytes"):
        storage.read_bytes(manifest, 10)
    with pytest.raises(FormatError, match="truncated"):
        storage.read_range(bin_name, len(local) - 4, 8)
    with pytest.raises(FormatError, match=r"s3://.*/rec/nothere.bin: no such object"):
        storage.read_range("nothere.bin", 0, 8)
    with pytest.raises(FormatError, match="not a plain file name"):
        storage.read_range("../other/x.bin", 0, 8)
    assert storage.describe(bin_name) == f"{s3.url('rec')}/{bin_name}"


def test_push_uploads_only_what_is_new_and_reads_back_equal(s3, tmp_path):
    cloud = _cloud()
    d = tmp_path / "rec"
    record_cartpole(d, episodes=5, seed=1, target_batch_bytes=2_000)
    first = cloud.push(d, s3.url("cp"))
    names = local_files(d)
    fs = s3.filesystem()
    remote = {os.path.basename(e["name"]): e["size"] for e in fs.ls(s3.url("cp"), detail=True)}
    assert remote == names
    assert first.skipped == 0 and first.uploaded == len(names) - 1 and first.manifests == 1
    # A second writer and more batches: the re-run uploads only those, and rewrites manifests.
    record_cartpole(d, episodes=3, seed=2, target_batch_bytes=2_000)
    mtimes = {n: fs.info(f"{s3.url('cp')}/{n}")["LastModified"] for n in names
              if not n.endswith(".manifest.json")}
    time.sleep(1.1)  # S3 times have a resolution of one second
    second = cloud.push(d, s3.url("cp"))
    new = set(local_files(d)) - set(names)
    assert second.skipped == first.uploaded
    assert second.uploaded == len([n for n in new if not n.endswith(".manifest.json")])
    assert second.manifests == 2
    for n, t in mtimes.items():
        assert fs.info(f"{s3.url('cp')}/{n}")["LastModified"] == t, f"{n} uploaded twice"
    # What the remote holds is what the directory holds, byte for byte.
    for n in local_files(d):
        assert fs.cat_file(f"{s3.url('cp')}/{n}") == (d / n).read_bytes()
    # And a pushed copy pulled back reads as the original.
    back = tmp_path / "back"
    fs.get(s3.url("cp") + "/", str(back), recursive=True)
    with RecordingReader(d) as a, RecordingReader(back) as b:
        assert len(a) == len(b) == 8
        for i in range(len(a)):
            np.testing.assert_array_equal(a[i].observations, b[i].observations)
            np.testing.assert_array_equal(a[i].actions, b[i].actions)


def test_push_cli_with_storage_options(s3, tmp_path, monkeypatch):
    d = tmp_path / "rec"
    record_cartpole(d, episodes=2)
    monkeypatch.delenv("AWS_ENDPOINT_URL")  # only --storage-options says where the server is
    env = {k: v for k, v in os.environ.items() if k != "AWS_ENDPOINT_URL"}
    env["PYTHONPATH"] = str(ROOT)
    opts = json.dumps({"endpoint_url": s3.endpoint})
    p = subprocess.run([sys.executable, "-m", "gym_recorder", "push", str(d), s3.url("c"),
                        "--storage-options", opts], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    batch_files = len([n for n in os.listdir(d) if ".ep" in n])
    assert f"{batch_files} files uploaded, 0 already there, 1 manifest written" in p.stdout, p.stdout
    assert s3.url("c") in p.stdout
    assert sorted(os.path.basename(n) for n in s3.filesystem().ls(s3.url("c"))) == \
        sorted(os.listdir(d))
    p = subprocess.run([sys.executable, "-m", "gym_recorder", "push", str(d), s3.url("c"),
                        "--storage-options", opts], capture_output=True, text=True, env=env,
                       timeout=120)
    assert p.returncode == 0 and f"0 files uploaded, {batch_files} already there" in p.stdout, p.stdout
    p = subprocess.run([sys.executable, "-m", "gym_recorder", "push", str(d), s3.url("c"),
                        "--storage-options", "[1]"], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "--storage-options" in p.stderr


def test_unreachable_refused_and_missing_are_named(s3, tmp_path):
    cloud = _cloud()
    d = tmp_path / "rec"
    record_cartpole(d, episodes=1)
    dead = f"http://127.0.0.1:{free_port()}"
    opts = {"endpoint_url": dead, "config_kwargs": {"retries": {"max_attempts": 1}}}
    with pytest.raises(StorageError, match=r"s3://.*/x: cannot be reached") as e:
        cloud.push(d, s3.url("x"), storage_options=opts)
    assert "\n" not in str(e.value)
    with pytest.raises(StorageError, match="cannot be reached"):
        cloud.FsspecStorage(s3.url("x"), opts)
    # No such bucket, or nothing under the prefix: no recording there.
    with pytest.raises(FormatError, match=r"s3://no-such-bucket-zz/r: no recording there"):
        cloud.FsspecStorage("s3://no-such-bucket-zz/r", s3.options)
    with pytest.raises(FormatError, match=r"s3://.*/nothing-here: no recording there"):
        RecordingReader(s3.url("nothing-here"), storage_options=s3.options)
    # Credentials refused: moto checks them once its IAM auth is switched on.
    import urllib.request

    def auth(count: str) -> None:
        urllib.request.urlopen(urllib.request.Request(
            f"{s3.endpoint}/moto-api/reset-auth", data=count.encode(), method="POST",
            headers={"Content-Type": "text/plain"})).read()

    auth("0")
    try:
        with pytest.raises(StorageError, match=r"s3://.*/x: credentials refused"):
            cloud.push(d, s3.url("x"), storage_options={"key": "AKIAWRONG", "secret": "no",
                                                        "token": None})
    finally:
        auth("inf")
    assert s3.filesystem().ls(s3.url("")) == []  # nothing was written
    # A manifest naming an object that is gone: the URL of that object.
    cloud.push(d, s3.url("gone"))
    bin_name = [n for n in os.listdir(d) if n.endswith(".bin")][0]
    s3.filesystem().rm(f"{s3.url('gone')}/{bin_name}")
    storage = cloud.FsspecStorage(s3.url("gone"), s3.options)
    with pytest.raises(FormatError, match=rf"{s3.url('gone')}/{bin_name}: no such object"):
        storage.read_range(bin_name, 0, 8)


PUSH_SLOWLY = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
from gym_recorder.integrations import cloud
fs, _ = cloud.open_fs(sys.argv[3], {})  # the instance push gets too (fsspec caches it)
put = fs.put_file
def put_slowly(local, remote, **kw):
    put(local, remote, **kw)
    print("uploaded", remote, flush=True)
    time.sleep(0.3)
fs.put_file = put_slowly
cloud.push(sys.argv[2], sys.argv[3])
"""


def test_killed_push_leaves_the_remote_readable(s3, tmp_path):
    cloud = _cloud()
    d = tmp_path / "rec"
    record_images(d, episodes=2, target=60_000)
    cloud.push(d, s3.url("k"))
    pushed = local_files(d)
    record_images(d, episodes=4, target=60_000)  # a second writer with many batches
    new_batches = [n for n in set(local_files(d)) - set(pushed) if ".ep" in n]
    assert len(new_batches) >= 6
    script = tmp_path / "slow_push.py"
    script.write_text(PUSH_SLOWLY)
    proc = subprocess.Popen([sys.executable, str(script), str(ROOT), str(d), s3.url("k")],
                            stdout=subprocess.PIPE, text=True)
    for _ in range(3):  # let it upload a few batch files, then kill it mid-way
        assert proc.stdout.readline().startswith("uploaded")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    fs = s3.filesystem()
    remote = {os.path.basename(n) for n in fs.ls(s3.url("k"))}
    assert 0 < len(remote - set(pushed)) < len(new_batches)  # it was killed half-way
    assert not any(n.endswith(".manifest.json") for n in remote - set(pushed))
    # Every manifest on the remote names only objects that are there, with their sizes.
    storage = cloud.FsspecStorage(s3.url("k"), s3.options)
    for m in (n for n in storage.list() if n.endswith(".manifest.json")):
        for b in json.loads(storage.read_bytes(m, 1 << 20))["batches"]:
            assert storage.size(b["bin"]) == b["bin_size"]
            assert storage.size(b["fn"]) == b["json_size"]
    # The re-run completes it.
    again = cloud.push(d, s3.url("k"))
    assert again.uploaded == len(new_batches) - len(remote - set(pushed))
    assert {os.path.basename(n) for n in fs.ls(s3.url("k"))} == set(local_files(d))


def assert_episodes_equal(a, b):
    assert len(a) == len(b)
    for i in range(len(a)):
        x, y = a[i], b[i]
        for name in ("observations", "actions", "rewards", "terminations", "truncations"):
            u, v = getattr(x, name), getattr(y, name)
            assert u.dtype == v.dtype and u.shape == v.shape and u.tobytes() == v.tobytes(), \
                f"episode {i} {name}"
        assert (x.infos, x.seed, x.end, x.writer, x.env_id) == \
            (y.infos, y.seed, y.end, y.writer, y.env_id)


def test_reader_at_an_s3_url_equals_the_local_reader_and_reads_ranges(s3, tmp_path):
    cloud = _cloud()
    d = tmp_path / "rec"
    record_images(d, episodes=4, size=48, length=40, target=400_000)
    cloud.push(d, s3.url("img"))
    with RecordingReader(d) as local, \
            RecordingReader(s3.url("img"), storage_options=s3.options) as remote:
        assert isinstance(remote.storage, cloud.FsspecStorage)
        assert_episodes_equal(local, remote)
        assert remote.observation_space == local.observation_space
    # One episode of a fresh reader fetches the manifests, its batch JSON and about its own
    # arrays: far less than the recording.
    bins = sum(os.path.getsize(d / n) for n in os.listdir(d) if n.endswith(".bin"))
    jsons = sum(os.path.getsize(d / n) for n in os.listdir(d) if n.endswith(".json"))
    with RecordingReader(s3.url("img"), storage_options=s3.options) as remote:
        ep = remote[2]
        own = sum(a.nbytes for a in (ep.observations, ep.actions, ep.rewards,
                                     ep.terminations, ep.truncations))
        fetched = remote.storage.bytes_read
        assert own < fetched < own + jsons + (64 << 10), (own, fetched, bins)
        assert fetched < bins / 2
    # A URL with file:// reads the same.
    with RecordingReader(d) as local, RecordingReader(f"file://{d}") as viafile:
        assert_episodes_equal(local, viafile)


def test_push_to_a_missing_bucket_is_named(s3, tmp_path):
    cloud = _cloud()
    d = tmp_path / "rec"
    record_cartpole(d, episodes=1)
    with pytest.raises(StorageError, match=r"s3://no-such-bucket-q1/r/.*\.bin: cannot be "
                                           r"written \(no such bucket"):
        cloud.push(d, "s3://no-such-bucket-q1/r")


def test_push_over_another_recording_of_the_same_prefix_is_refused(s3, tmp_path):
    """Two recordings with the same file prefix (``--file-prefix run``): the second push would
    take the first one's batches (same names, same sizes) for its own and leave a remote whose
    manifest names files of another recording. It is refused, and the remote still reads."""
    from gym_recorder.errors import OutputExistsError

    cloud = _cloud()
    a, b = tmp_path / "a", tmp_path / "b"
    record_cartpole(a, episodes=4, seed=0, file_prefix="run", target_batch_bytes=3000)
    record_cartpole(b, episodes=4, seed=1, file_prefix="run", target_batch_bytes=3000)
    cloud.push(a, s3.url("same"))
    before = {n: s3.filesystem().cat_file(f"{s3.url('same')}/{n}") for n in local_files(a)}
    with pytest.raises(OutputExistsError, match="another recording under the writer prefix run"):
        cloud.push(b, s3.url("same"))
    after = {n: s3.filesystem().cat_file(f"{s3.url('same')}/{n}") for n in local_files(a)}
    assert after == before  # nothing was uploaded
    with RecordingReader(s3.url("same"), storage_options=s3.options, verify=True) as remote, \
            RecordingReader(a) as local:
        assert_episodes_equal(local, remote)
    # A batch left by a killed push of another recording is sent again, not taken as ours.
    fs = s3.filesystem()
    for n in local_files(b):
        if n.endswith(".ep000000001.json") or n.endswith(".ep000000001.bin"):
            fs.pipe_file(f"{s3.url('fresh')}/{n}", (a / n).read_bytes())
    result = cloud.push(b, s3.url("fresh"))
    assert result.skipped == 0
    with RecordingReader(s3.url("fresh"), storage_options=s3.options, verify=True) as remote, \
            RecordingReader(b) as local:
        assert_episodes_equal(local, remote)


def test_push_of_a_directory_that_is_not_a_recording_is_refused(s3, tmp_path):
    cloud = _cloud()
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    with pytest.raises(FormatError, match="not a recording"):
        cloud.push(tmp_path / "notes", s3.url("notes"))
    assert not s3.filesystem().exists(s3.url("notes") + "/a.txt")


def test_a_malformed_remote_file_is_named_by_its_url(s3, tmp_path):
    """A batch changed on the bucket (its size no longer the manifest's) or a reference outside
    its .bin: the reader's errors name the object by its URL, through every way of reading."""
    cloud = _cloud()
    d = tmp_path / "rec"
    record_cartpole(d, episodes=3)
    cloud.push(d, s3.url("bad"))
    fs = s3.filesystem()
    json_name = [n for n in os.listdir(d) if n.endswith(".json") and ".ep" in n][0]
    url = f"{s3.url('bad')}/{json_name}"
    fs.pipe_file(url, (d / json_name).read_bytes() + b" ")
    with RecordingReader(s3.url("bad"), storage_options=s3.options) as reader:
        # (column and transitions, which read the arrays through the batch index, find the
        # JSON of another size too: one answer for one damage)
        for read in (lambda: reader[0], lambda: list(reader), lambda: reader.summary(1),
                     lambda: reader.episode_rows(0),
                     lambda: [reader.read_batch(b) for b in reader.batches()],
                     lambda: reader.column("actions"), lambda: transitions(reader)):
            with pytest.raises(FormatError, match=rf"^{url}: file has \d+ bytes, the manifest "
                                                  r"says \d+$"):
                read()
    # The .bin changed: every way of reading names it, the batch index's way too.
    fs.pipe_file(url, (d / json_name).read_bytes())
    bin_url = url[:-len(".json")] + ".bin"
    fs.pipe_file(bin_url, (d / json_name.replace(".json", ".bin")).read_bytes() + b" ")
    with RecordingReader(s3.url("bad"), storage_options=s3.options) as reader:
        for read in (lambda: reader[0], lambda: list(reader), lambda: reader.column("actions"),
                     lambda: transitions(reader), lambda: reader.episode_rows(0).rows(
                         "actions", 0, 1)):
            with pytest.raises(FormatError, match=rf"^{bin_url}: file has \d+ bytes, the "
                                                  r"manifest says \d+$"):
                read()
    # A reference outside its .bin, the batch JSON and its manifest entry made to agree.
    local = tmp_path / "local"
    record_cartpole(local, episodes=2)
    (manifest,) = local.glob("*.manifest.json")
    man = json.loads(manifest.read_bytes())
    batch = local / man["batches"][0]["fn"]
    doc = json.loads(batch.read_bytes())
    doc["episodes"][0]["rewards"]["npyoff"] = 1 << 20
    data = json.dumps(doc).encode()
    batch.write_bytes(data)
    man["batches"][0].update(json_size=len(data), json_crc32=zlib.crc32(data))
    manifest.write_bytes(json.dumps(man).encode())
    with pytest.raises(FormatError, match=rf"^{batch.name} entry 0 rewards: bytes"):
        RecordingReader(local)[0]  # (a local directory's errors name the file alone)
    cloud.push(local, s3.url("outside"))
    with RecordingReader(s3.url("outside"), storage_options=s3.options) as reader:
        with pytest.raises(FormatError, match=rf"^{s3.url('outside')}/{batch.name} entry 0 "
                                              r"rewards: bytes \d+\.\.\d+ lie outside"):
            reader[0]
