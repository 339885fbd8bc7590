"""Hostile recordings, names and files: the untouched recordings read back inside their directory;
only plain names of regular files inside the directory are read (no path, symlink, FIFO or
directory).

See tests/hostile.py for how each recording is broken and read under guard.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from gym_recorder import RecordingReader
from hostile import (  # noqa: F401  (make and sources are fixtures)
    batch_names, cp_obs, guarded, load_manifest, make, manifest_path, mutate_manifest,
    read_everything, refused, rewrite_batch, sources)

# ---------------------------------------------------------------------------------------------
# Controls: the untouched recordings read back, and the guard works


@pytest.mark.parametrize("name", ["cp", "nd", "ci", "tx", "legacy"])
def test_untouched_recordings_read_back_inside_the_directory(make, name):
    d = make(name)
    for verify in (False, True):
        with guarded(d) as opened:
            eps = read_everything(d, verify)
        assert len(eps) >= 2
        assert opened and all(p.startswith(os.path.realpath(d) + os.sep) for p in opened)
        assert any(p.endswith(".bin") for p in opened)


def test_guard_catches_a_read_outside(make, tmp_path):
    d = make("cp")
    with pytest.raises(AssertionError, match="opened outside"):
        with guarded(d):
            with open(tmp_path / "outside" / "secret.bin", "rb"):
                pass


# ---------------------------------------------------------------------------------------------
# npyfile, fn, bin: only plain names of regular files inside the directory

BAD_NAMES = [
    "../outside/secret.bin",
    "..",
    "../rec/cp.ep000000000.bin",
    "{outside}/secret.bin",           # absolute path, filled in by the test
    "/etc/passwd",
    "sub/cp.ep000000000.bin",
    "sub\\cp.ep000000000.bin",
    "..\\outside\\secret.bin",
    "C:\\secret.bin",
    "",
    ".",
    ".hidden.bin",
    "cp.ep000000000.bin\0",
    "cp.ep000000000.bin/",
    "~/secret.bin",
    None,
    5,
    True,
    ["cp.ep000000000.bin"],
    {"name": "cp.ep000000000.bin"},
]


def _fill(name: Any, tmp_path: Path) -> Any:
    return name.format(outside=tmp_path / "outside") if isinstance(name, str) and "{" in name \
        else name


@pytest.mark.parametrize("name", BAD_NAMES)
def test_npyfile_must_be_a_plain_name(make, tmp_path, name):
    d = make("cp")
    (d / "sub").mkdir()
    shutil.copy(tmp_path / "outside" / "secret.bin", d / "sub" / "cp.ep000000000.bin")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyfile=_fill(name, tmp_path)))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: file name .* is not a plain file")


@pytest.mark.parametrize("key", ["fn", "bin"])
@pytest.mark.parametrize("name", BAD_NAMES)
def test_manifest_fn_and_bin_must_be_plain_names(make, tmp_path, key, name):
    d = make("cp")
    mutate_manifest(d, lambda m: m["batches"][0].update({key: _fill(name, tmp_path)}))
    refused(d, r"cp\.manifest\.json batch 0: file name .* is not a plain file")


@pytest.mark.parametrize("name", BAD_NAMES)
def test_legacy_fn_and_npyfile_must_be_plain_names(make, tmp_path, name):
    d = make("legacy")
    mutate_manifest(d, lambda m: m["batches"][0].update(fn=_fill(name, tmp_path)))
    refused(d, r"openaigym\.trace\.0\.4242\.manifest\.json batch 0: file name .* is not a plain")
    d2 = make("legacy", "rec2")
    rewrite_batch(d2, lambda doc: doc["episodes"][1]["rewards"].update(
        npyfile=_fill(name, tmp_path)))
    refused(d2, r"ep000000000\.json episode 1 rewards: file name .* is not a plain")


def test_npyfile_of_another_file_in_the_directory_is_refused(make):
    d = make("cp")
    other = batch_names(d, 1)[1]
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyfile=other))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: npyfile 'cp\.ep0+\d+\.bin' is not "
               r"this batch's 'cp\.ep000000000\.bin'")


def test_manifest_naming_a_batch_of_another_prefix_is_refused(make, sources, tmp_path):
    d = make("cp")
    # A complete, valid batch, copied in under the names of another writer "xx".
    man = load_manifest(sources["cp"])
    for key in ("fn", "bin"):
        name = man["batches"][0][key]
        shutil.copy(sources["cp"] / name, d / name.replace("cp.", "xx."))
    mutate_manifest(d, lambda m: m["batches"][0].update(
        fn="xx.ep000000000.json", bin="xx.ep000000000.bin"))
    refused(d, r"cp\.manifest\.json batch 0: .*'xx\.ep000000000\.json'.* expected "
               r"'cp\.ep000000000\.json'")


def test_batch_file_names_must_match_their_first_entry(make):
    d = make("cp")
    mutate_manifest(d, lambda m: m["batches"][1].update(fn=m["batches"][0]["fn"]))
    refused(d, r"cp\.manifest\.json batch 1: .* expected 'cp\.ep0+\d+\.json'")


@pytest.mark.parametrize("which", ["bin", "json"])
def test_symlinked_batch_files_leading_out_are_refused(make, tmp_path, which):
    d = make("cp")
    fn, binname = batch_names(d, 0)
    target = {"bin": binname, "json": fn}[which]
    (d / target).unlink()
    os.symlink(tmp_path / "outside" / f"secret.{which}", d / target)
    refused(d, rf"cp\.ep000000000\.{which}: .*(cannot open|not a regular file)")


def test_symlink_inside_the_directory_is_refused_too(make):
    d = make("cp")
    _, binname = batch_names(d, 0)
    os.rename(d / binname, d / "real.bin")
    os.symlink("real.bin", d / binname)
    refused(d, r"cp\.ep000000000\.bin: .*(cannot open|not a regular file)")


def test_symlinked_manifest_is_ignored(make, tmp_path):
    d = make("cp")
    os.unlink(manifest_path(d))
    # A symlink leading out, one to a file inside, one to a directory: none is a manifest.
    os.symlink(tmp_path / "outside" / "secret.manifest.json", d / "cp.manifest.json")
    shutil.copy(tmp_path / "outside" / "secret.manifest.json", d / "real.json")
    os.symlink("real.json", d / "zz.manifest.json")
    os.symlink(tmp_path / "outside", d / "dir.manifest.json")
    os.mkdir(d / "sub.manifest.json")
    with guarded(d) as opened:
        with RecordingReader(d) as reader:
            assert len(reader) == 0 and reader.writers == []
    assert not any(p.endswith(".manifest.json") for p in opened)


@pytest.mark.parametrize("which", ["bin", "json"])
def test_fifo_instead_of_a_batch_file_does_not_hang(make, which):
    d = make("cp")
    fn, binname = batch_names(d, 0)
    target = {"bin": binname, "json": fn}[which]
    (d / target).unlink()
    os.mkfifo(d / target)
    refused(d, rf"cp\.ep000000000\.{which}: .*not a regular file")


@pytest.mark.parametrize("which", ["bin", "json"])
def test_directory_instead_of_a_batch_file_is_refused(make, which):
    d = make("cp")
    fn, binname = batch_names(d, 0)
    target = {"bin": binname, "json": fn}[which]
    (d / target).unlink()
    (d / target).mkdir()
    refused(d, rf"cp\.ep000000000\.{which}: .*(not a regular file|cannot open)")
