"""Reaching an fsspec filesystem (gym_recorder.integrations.cloud_fs): a URL opened with bounded
S3 timeouts unless the user says otherwise, and what a filesystem raises turned into the named
error for that URL (a missing object a FormatError, the rest StorageError saying why)."""

from __future__ import annotations

import pytest

from gym_recorder.errors import FormatError, StorageError
from needs import need_module


@pytest.fixture(autouse=True)
def _fsspec():
    need_module("fsspec", 'pip install ".[cloud]"')


def test_a_missing_object_is_a_format_error_naming_the_url():
    from gym_recorder.integrations.cloud_fs import open_fs, storage_error

    fs, root = open_fs("memory://cloud-fs-test/rec", None)
    assert root == "/cloud-fs-test/rec"
    with pytest.raises(FileNotFoundError) as raised:
        fs.cat_file(f"{root}/a.manifest.json")
    e = storage_error(raised.value, "memory://cloud-fs-test/rec/a.manifest.json", "reading")
    assert isinstance(e, FormatError)
    assert str(e) == "memory://cloud-fs-test/rec/a.manifest.json: no such object (reading)"


def test_refused_credentials_and_unreachable_endpoints_are_storage_errors():
    from gym_recorder.integrations.cloud_fs import storage_error

    url = "s3://bucket/rec"
    denied = storage_error(PermissionError("Access Denied"), url, "listing")
    assert isinstance(denied, StorageError)
    assert str(denied) == "s3://bucket/rec: credentials refused while listing (Access Denied)"
    try:  # the error the client library raised, as the cause of fsspec's own
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise OSError("request failed") from cause
    except OSError as e:
        down = storage_error(e, url, "reading")
    assert isinstance(down, StorageError)
    assert str(down).startswith("s3://bucket/rec: cannot be reached (")
    other = storage_error(RuntimeError("boom"), url, "writing")
    assert str(other) == "s3://bucket/rec: writing failed (RuntimeError: boom)"
    mine = StorageError("already named")
    assert storage_error(mine, url, "reading") is mine


def test_a_url_fsspec_cannot_open_is_one_storage_error():
    from gym_recorder.integrations.cloud_fs import open_fs

    with pytest.raises(StorageError, match=r"^nosuch://x/y: cannot open \(ValueError"):
        open_fs("nosuch://x/y", None)
    with pytest.raises(TypeError, match="storage_options must be a dict, got list"):
        open_fs("memory://x", [])  # type: ignore[arg-type]


def test_s3_timeouts_are_bounded_unless_the_user_sets_them():
    need_module("s3fs", 'pip install ".[cloud]"')
    from gym_recorder.integrations.cloud_fs import S3_CONFIG, S3_OPTIONS, open_fs

    fs, root = open_fs("s3://bucket/rec", {"anon": True})  # (makes no request)
    assert root == "bucket/rec"
    assert fs.retries == S3_OPTIONS["retries"] == 4
    assert fs.config_kwargs == S3_CONFIG
    fs, _ = open_fs("s3://bucket/rec", {"anon": True, "skip_instance_cache": True,
                                        "config_kwargs": {"read_timeout": 60}})
    assert fs.config_kwargs["read_timeout"] == 60 and fs.config_kwargs["connect_timeout"] == 5
