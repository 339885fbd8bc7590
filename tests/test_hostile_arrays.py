"""Hostile recordings, array references and file contents: offsets, sizes, shapes and dtypes;
truncated, empty, garbled and huge files.

See tests/hostile.py for how each recording is broken and read under guard.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gym_recorder import ChecksumError
from gym_recorder.format import MAX_JSON_BYTES
from hostile import (  # noqa: F401  (make and sources are fixtures)
    batch_names, cp_obs, first_entry, make, manifest_path, mutate_manifest, read_everything,
    refused, rewrite_batch, sources)

# ---------------------------------------------------------------------------------------------
# Offsets, sizes, shapes


@pytest.mark.parametrize("offset, match", [
    (-8, r"npyoff must be an integer >= 0"),
    (-(2 ** 70), r"npyoff must be an integer >= 0"),
    (2 ** 64, r"lie outside"),
    (10 ** 40, r"lie outside"),
    (2 ** 63 - 8, r"lie outside"),
    (8.0, r"npyoff must be an integer"),
    (1e300, r"npyoff must be an integer"),
    (True, r"npyoff must be an integer"),
    ("8", r"npyoff must be an integer"),
    (None, r"npyoff must be an integer"),
    ([8], r"npyoff must be an integer"),
    (3, r"npyoff 3 is not a multiple of 8"),
    (4, r"npyoff 4 is not a multiple of 8"),
])
def test_bad_offsets(make, offset, match):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyoff=offset))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: .*" + match)


def test_offset_plus_size_beyond_the_file(make):
    d = make("cp")
    fn, binname = batch_names(d, 0)
    end = (d / binname).stat().st_size // 8 * 8
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyoff=end))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: bytes \d+\.\.\d+ lie outside "
               r"cp\.ep000000000\.bin")


@pytest.mark.parametrize("delta", [1, -1, 8, -8])
def test_size_must_equal_shape_times_itemsize(make, delta):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(size=cp_obs(doc)["size"] + delta))
    refused(d, r"entry 0 observations: size \d+ does not match shape")


@pytest.mark.parametrize("size", [-1, True, 1.5, "80", None, 2 ** 80])
def test_size_of_the_wrong_type(make, size):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(size=size))
    refused(d, r"entry 0 observations: size")


@pytest.mark.parametrize("shape, size, match", [
    ([-1, 4], 16, r"every dimension must be an integer >= 0"),
    ([2.0, 4], 32, r"every dimension must be an integer"),
    (["2", 4], 32, r"every dimension must be an integer"),
    ([True, 4], 16, r"every dimension must be an integer"),
    ([None], 0, r"every dimension must be an integer"),
    ([[2], 4], 32, r"every dimension must be an integer"),
    ([1] * 33, 4, r"shape must be a list of at most 32"),
    ([1] * 10_000, 4, r"shape must be a list of at most 32"),
    ("[2, 4]", 32, r"shape must be a list"),
    (None, 4, r"shape must be a list"),
    ({"0": 2}, 32, r"shape must be a list"),
    ([2 ** 62, 4], 2 ** 66, r"every dimension must be an integer >= 0 and <= \d+"),
    ([2 ** 64], 2 ** 66, r"every dimension must be an integer >= 0 and <= \d+"),
    ([2 ** 40, 2 ** 40, 0], 0, r"too many elements"),
    ([0, 2 ** 48, 2 ** 48], 0, r"too many elements"),
    ([2 ** 32, 2 ** 32, 2 ** 32], 2 ** 98, r"too many elements"),
    ([2 ** 24, 2 ** 24], 2 ** 50, r"too many elements"),
    ([2 ** 20, 2 ** 20], 2 ** 42, r"bytes 0\.\.4398046511104 lie outside cp\.ep0+\.bin"),
    ([0], 0, r"shape \(0,\), expected \(\d+, 4\)"),
    ([0, 2 ** 20, 2 ** 20], 0, r"shape \(0, 1048576, 1048576\), expected \(\d+, 4\)"),
    ([0, 2 ** 23, 2 ** 23], 0, r"shape \(0, 8388608, 8388608\), expected \(\d+, 4\)"),
    ([0, 2 ** 23, 2 ** 23 + 1], 0, r"too many elements"),
])
def test_bad_shapes(make, shape, size, match):
    d = make("cp")
    # No CRC: with verify=True the checksum of the (changed) byte range would fail first.
    rewrite_batch(d, lambda doc: cp_obs(doc).update(shape=shape, size=size, crc32=None))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: .*" + match)


def test_order_other_than_c_is_refused(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(order="F"))
    refused(d, r"entry 0 observations: only C order is supported, got 'F'")


def test_reference_pointing_at_other_bytes_is_caught_by_verify(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(npyoff=cp_obs(doc)["npyoff"] + 8))
    read_everything(d, verify=False)  # well-formed: only the checksum can tell
    refused(d, r"entry 0 observations: CRC-32 of the array's bytes does not match",
            error=ChecksumError, verify_modes=(True,))


# ---------------------------------------------------------------------------------------------
# dtypes


@pytest.mark.parametrize("dtype", [
    "O", "|O", "<O", "O8", "object", "V8", "|V8", "<V8", "M8[ns]", "<M8[ns]", "m8[s]", "<m8",
    "<f4,<i4", "[('a', '<f4')]", "f4,f4,f4,f4", "(4,)f4", "<U0", "|S0", "<f3", "b2", "<i16",
    "float128", "longdouble", "g", "d", "xyz", "", "<", "<U999999999", "<f4 ", "\u00fcf4",
    5, 4.0, None, True, ["<f4"], {"descr": "<f4"},
])
def test_refused_dtypes(make, dtype):
    d = make("cp")
    rewrite_batch(d, lambda doc: cp_obs(doc).update(dtype=dtype))
    refused(d, r"cp\.ep000000000\.json entry 0 observations: unsupported dtype")


def test_rewards_and_flags_of_the_wrong_dtype(make):
    d = make("cp")
    rewrite_batch(d, lambda doc: first_entry(doc)["rewards"].update(dtype=">f8"))
    refused(d, r"entry 0 rewards: dtype >f8, expected float64")
    d2 = make("cp", "rec2")
    rewrite_batch(d2, lambda doc: first_entry(doc)["terminations"].update(dtype="|u1"))
    refused(d2, r"entry 0 terminations: dtype uint8, expected bool")




# ---------------------------------------------------------------------------------------------
# Truncated, empty, garbled files


def test_truncated_bin(make):
    d = make("cp")
    _, binname = batch_names(d, 0)
    data = (d / binname).read_bytes()
    (d / binname).write_bytes(data[: len(data) // 2])
    refused(d, r"cp\.ep000000000\.bin: file has \d+ bytes, the manifest says \d+")


def test_truncated_bin_in_a_legacy_recording(make):
    d = make("legacy")
    _, binname = batch_names(d, 0)
    data = (d / binname).read_bytes()
    (d / binname).write_bytes(data[:40])
    refused(d, r"ep000000000\.json episode \d .*lie outside openaigym\.trace\.0\.4242\.ep0+\.bin")


@pytest.mark.parametrize("cut", [0, 1, 100, -1])
def test_truncated_batch_json_with_a_stale_manifest(make, cut):
    d = make("cp")
    fn, _ = batch_names(d, 0)
    data = (d / fn).read_bytes()
    (d / fn).write_bytes(data[:cut])
    refused(d, r"cp\.ep000000000\.json: file has \d+ bytes, the manifest says \d+")


@pytest.mark.parametrize("cut", [0, 1, 100, -1])
def test_truncated_batch_json(make, cut):
    d = make("cp")
    rewrite_batch(d, lambda doc: json.dumps(doc).encode()[:cut])
    # (0 or 1 bytes cannot hold the manifest's 'len' entries: a reader may say so first)
    refused(d, r"cp\.ep000000000\.json: not valid JSON|batch 0: 'len' 2 entries cannot fit")


def test_batch_json_with_wrong_crc(make):
    d = make("cp")
    fn, _ = batch_names(d, 0)
    data = bytearray((d / fn).read_bytes())
    data[data.index(b'"seed"') + 1] = ord("S")
    (d / fn).write_bytes(bytes(data))
    refused(d, r"cp\.ep000000000\.json: CRC-32 does not match the manifest", error=ChecksumError)


@pytest.mark.parametrize("raw, match", [
    (b"\xff\xfe{\"episodes\": []}", r"not valid JSON"),
    (b"{\"episodes\": [], \"x\": \"\xc3\x28\"}", r"not valid JSON"),
    (b"\xef\xbb\xbf{\"episodes\": []}", r"not valid JSON"),
    (b"{\"episodes\": [NaN]}", r"not valid JSON.*NaN"),
    (b"{\"episodes\": [Infinity]}", r"not valid JSON.*Infinity"),
    (b"{\"episodes\": [-Infinity]}", r"not valid JSON.*Infinity"),
    (b"{\"episodes\": []} trailing", r"not valid JSON"),
    (b"{\"episodes\": [] ", r"not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, r"not valid JSON|nested too deeply"),
    (b"{\"a\":" * 100_000 + b"1" + b"}" * 100_000, r"not valid JSON|nested too deeply"),
    (b"{\"episodes\": [" + b"9" * 5000 + b"]}", r"not valid JSON"),
    (b"[]", r"a batch must be an object with an 'episodes' list"),
    (b"17", r"a batch must be an object"),
    (b"\"episodes\"", r"a batch must be an object"),
    (b"null", r"a batch must be an object"),
    (b"{}", r"a batch must be an object with an 'episodes' list"),
    (b"{\"episodes\": {}}", r"a batch must be an object with an 'episodes' list"),
    (b"{\"episodes\": []}", r"0 entries, the manifest says \d+"),
])
def test_garbled_batch_json(make, raw, match):
    d = make("cp")
    rewrite_batch(d, lambda doc: raw)
    refused(d, r"cp\.ep000000000\.json: " + match)


@pytest.mark.parametrize("raw, match", [
    (b"", r"not valid JSON"),
    (b"{\"batches\": [", r"not valid JSON"),
    (b"\xff" * 10, r"not valid JSON"),
    (b"{\"format\": \"gym_recorder\", \"version\": NaN}", r"not valid JSON.*NaN"),
    (b"[" * 100_000, r"not valid JSON|nested too deeply"),
    (b"[" * 100_000 + b"]" * 100_000, r"not valid JSON|nested too deeply"),
    (b"[]", r"a manifest must be a JSON object"),
    (b"3", r"a manifest must be a JSON object"),
    (b"null", r"a manifest must be a JSON object"),
    (b"\"x\"", r"a manifest must be a JSON object"),
    (b"{}", r"no format/version and not a gym-recording manifest"),
])
def test_garbled_manifest(make, raw, match):
    d = make("cp")
    mutate_manifest(d, lambda m: raw)
    refused(d, r"cp\.manifest\.json: " + match)


def test_truncated_manifest(make):
    d = make("nd")
    data = manifest_path(d).read_bytes()
    for cut in (1, len(data) // 3, len(data) - 1):
        manifest_path(d).write_bytes(data[:cut])
        refused(d, r"nd\.manifest\.json: not valid JSON")


def _sparse(path: Path, size: int) -> None:
    with open(path, "r+b" if path.exists() else "wb") as f:
        f.truncate(size)


def test_huge_manifest_is_refused_without_reading_it(make):
    """A sparse manifest just over MAX_JSON_BYTES: refused from its size alone.

    Reading it would take a GiB; refused() bounds the peak RSS growth far below that.
    """
    d = make("cp")
    _sparse(manifest_path(d), MAX_JSON_BYTES + 1)
    refused(d, rf"cp\.manifest\.json: {MAX_JSON_BYTES + 1} bytes of JSON is more than "
               rf"{MAX_JSON_BYTES}")


def test_huge_batch_json_is_refused_without_reading_it(make):
    d = make("cp")
    fn, _ = batch_names(d, 0)
    _sparse(d / fn, MAX_JSON_BYTES + 8)
    mutate_manifest(d, lambda m: m["batches"][0].update(json_size=MAX_JSON_BYTES + 8))
    refused(d, r"cp\.ep000000000\.json: \d+ bytes of JSON is more than|batch 0: 'len' 2 "
               r"entries cannot fit a batch JSON of \d+ bytes \(at most")


def test_huge_legacy_batch_json_is_refused_without_reading_it(make):
    d = make("legacy")
    fn, _ = batch_names(d, 0)
    _sparse(d / fn, MAX_JSON_BYTES + 8)
    refused(d, r"ep000000000\.json: \d+ bytes of JSON is more than")


@pytest.mark.skipif(not os.path.exists("/proc/sys/vm/overcommit_memory")
                    or open("/proc/sys/vm/overcommit_memory").read().strip() == "1",
                    reason="needs Linux without unconditional memory overcommit")
def test_huge_sparse_bin_is_not_read_whole(make):
    """A sparse .bin of 4 TiB with a reference claiming all of it: refused, not allocated.

    The reader allocates what a (validated) reference claims, which the file's real size
    bounds; a sparse file makes that bound meaningless, so the allocation failure must come
    back as our error, with no memory touched.
    """
    d = make("cp")
    fn, binname = batch_names(d, 0)
    huge = 4 << 40
    try:
        _sparse(d / binname, huge)
    except OSError:
        pytest.skip("the file system refuses a 4 TiB sparse file")
    mutate_manifest(d, lambda m: m["batches"][0].update(bin_size=huge))
    rewrite_batch(d, lambda doc: cp_obs(doc).update(shape=[huge // 16, 4], size=huge, npyoff=0))
    refused(d, r"cp\.ep000000000\.bin: cannot allocate 4398046511104 bytes for array data")
