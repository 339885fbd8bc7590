"""Dtypes in a recording (gym_recorder.format.dtypes): which dtype strings a reader accepts, and
how one leaf's parts in different dtypes join without changing a value."""

from __future__ import annotations

import numpy as np
import pytest

from gym_recorder import FormatError
from gym_recorder.format.dtypes import (exact_dtype, exact_in, join_arrays, join_dtype,
                                        parse_dtype, rounding_dtypes)


@pytest.mark.parametrize("text, dtype", [("<f4", np.float32), ("|u1", np.uint8), ("<i8", np.int64),
                                         ("|b1", np.bool_), ("<U7", "<U7"), ("|S3", "S3"),
                                         ("float32", np.float32), ("bool", np.bool_)])
def test_plain_dtypes_are_accepted(text, dtype):
    assert parse_dtype(text, "w") == np.dtype(dtype)
    assert parse_dtype(text, "w") is parse_dtype(text, "w")  # (parsed once, then cached)


@pytest.mark.parametrize("text", ["|O", "O", "object", "V8", "<M8[s]", "<U0", "f3", "<f4,<f4",
                                  "[('a', '<f4')]", 4, None, "<U99999999"])
def test_object_structured_and_unknown_dtypes_are_refused_by_name(text):
    with pytest.raises(FormatError, match=r"^obs\[0\]: unsupported dtype"):
        parse_dtype(text, "obs[0]")


def test_exact_means_every_value_survives():
    assert exact_dtype(np.dtype(np.int32), np.dtype(np.float64))
    assert not exact_dtype(np.dtype(np.int64), np.dtype(np.float64))  # (numpy calls it safe)
    assert exact_in(np.array([2 ** 53], np.int64), np.dtype(np.float64))
    assert not exact_in(np.array([2 ** 53 + 1], np.int64), np.dtype(np.float64))
    nan = np.array([np.nan, 1.5], np.float64)
    assert exact_in(nan, np.dtype(np.float32))


def test_parts_join_in_numpys_result_type_when_no_value_changes():
    joined = join_arrays("obs", [np.array([1, 2], np.uint8), np.array([300], np.int16)])
    assert joined.dtype == np.int16 and joined.tolist() == [1, 2, 300]
    joined = join_arrays("obs", [np.array([1], np.int64), np.array([0.5])])
    assert joined.dtype == np.float64 and joined.tolist() == [1.0, 0.5]
    assert join_dtype([np.dtype("<U3"), np.dtype("<U5")], "w") == np.dtype("<U5")
    one = np.array([7], np.int8)
    assert join_arrays("obs", [one]) is one


def test_a_join_that_would_round_gives_the_rows_each_in_its_dtype():
    big = np.array([2 ** 53 + 1], np.int64)
    rows = join_arrays("obs", [big, np.array([0.5])])
    assert isinstance(rows, list) and [type(r) for r in rows] == [np.int64, np.float64]
    assert int(rows[0]) == 2 ** 53 + 1
    assert rounding_dtypes([big.dtype, np.dtype(np.float64)], np.dtype(np.float64)) == \
        {np.dtype(np.int64)}


def test_numbers_and_strings_do_not_mix():
    with pytest.raises(FormatError, match="obs: the episode's parts store one leaf with dtypes"):
        join_dtype([np.dtype("<f4"), np.dtype("<U2")], "obs")
    with pytest.raises(FormatError, match="do not mix"):
        join_arrays("obs", [np.array(["a"]), np.array([b"a"])])
