"""gym_recorder.format.values on its own: VALUEs encode to strict JSON and decode back to the same value."""

import json
import math

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from gym_recorder import FormatError, UnsupportedValueError
from gym_recorder.format import MAX_NESTING
from gym_recorder.format.values import decode_value, encode_value


class Bin:
    """An in-memory .bin: the sink stores each array, the source gives it back by its reference."""

    def __init__(self):
        self.arrays = []

    def sink(self, arr):
        self.arrays.append(arr.copy())
        return {"__type": "ndarray", "at": len(self.arrays) - 1}

    def source(self, ref, where):
        return self.arrays[ref["at"]]


def roundtrip(value):
    store = Bin()
    text = json.dumps(encode_value(value, store.sink), allow_nan=False)  # strict JSON
    return decode_value(json.loads(text), store.source), store


def same(a, b):
    """Equal, with the same types all the way down (and NaN equal to NaN)."""
    assert type(a) is type(b), (a, b)
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    elif isinstance(a, float):
        assert a == b or (math.isnan(a) and math.isnan(b))
    elif isinstance(a, (list, tuple)):  # GraphInstance is a NamedTuple: compared item by item
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            same(a[k], b[k])
    else:
        assert a == b


VALUES = [
    None, True, 0, -(2**80), "héllo", 1.5, 5e-324, math.inf, -math.inf, math.nan,
    [1, [2.0, "x"]], (1, (2,)), {"a": 1, "b": {"c": None}}, {1: "int key", (2, 3): "tuple key"},
    {"__type": "a str key that looks like ours"}, b"\x00\xffbytes",
    np.float32(0.1), np.float16(-0.0), np.float64(np.nan), np.longdouble(1) / 3,
    np.clongdouble(complex(1, -2)) / 3,
    np.int8(-128), np.uint64(2**64 - 1), np.bool_(True), np.complex64(1 - 2j),
    np.complex128(complex(math.inf, -0.5)), np.str_("ü"), np.bytes_(b"ab"),
    np.arange(6, dtype=">i4").reshape(2, 3), np.array(["a", "bc"]), np.zeros((0, 3), np.uint8),
]


@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_values_come_back_the_same(value):
    back, _ = roundtrip(value)
    same(back, value)


def test_arrays_go_to_the_sink_and_the_rest_stays_json():
    value = {"obs": np.ones(3, np.float32), "n": 2, "seq": (np.int64(4), [np.zeros(1)])}
    encoded = encode_value(value, Bin().sink)
    assert encoded["n"] == 2
    assert encoded["obs"] == {"__type": "ndarray", "at": 0}
    assert encoded["seq"] == {"__type": "tuple", "items": [
        {"__type": "scalar", "dtype": "<i8", "value": 4}, [{"__type": "ndarray", "at": 1}]]}


def test_the_infos_and_samples_of_real_envs_come_back_the_same():
    env = gym.make("CartPole-v1")
    obs, info = env.reset(seed=3)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    row = {"obs": obs, "reward": reward, "done": (terminated, truncated), "info": info}
    for space in (spaces.Graph(spaces.Box(0, 1, (2,)), spaces.Discrete(3), seed=1),
                  spaces.Text(5, seed=2), spaces.Sequence(spaces.Discrete(4), seed=3),
                  spaces.OneOf((spaces.Discrete(2), spaces.Box(0, 1, (2,))), seed=4)):
        row[type(space).__name__] = space.sample()
    back, store = roundtrip(row)
    same(back, row)
    assert any(a.dtype == np.float32 and a.shape == (4,) for a in store.arrays)  # CartPole's obs
    env.close()


@pytest.mark.parametrize("value, match", [
    (np.array([object()], dtype=object), "dtype object"),
    (object(), "type builtins.object"),
    ({1, 2}, "type builtins.set"),
])
def test_what_cannot_be_stored_is_refused(value, match):
    with pytest.raises(UnsupportedValueError, match=match):
        encode_value({"k": value}, Bin().sink, "info")


def test_subclasses_of_plain_types_are_refused_not_flattened():
    import enum

    class Color(enum.IntEnum):
        RED = 1

    with pytest.raises(UnsupportedValueError, match="losslessly"):
        encode_value(Color.RED, Bin().sink)


def nested(depth):
    value = 0
    for _ in range(depth):
        value = [value]
    return value


def test_nesting_is_bounded_on_both_sides():
    assert decode_value(encode_value(nested(MAX_NESTING), Bin().sink), Bin().source) == \
        nested(MAX_NESTING)
    with pytest.raises(UnsupportedValueError, match=f"deeper than {MAX_NESTING}"):
        encode_value(nested(MAX_NESTING + 1), Bin().sink)
    with pytest.raises(FormatError, match=f"deeper than {MAX_NESTING}"):
        decode_value(nested(MAX_NESTING + 1), Bin().source)


@pytest.mark.parametrize("obj, match", [
    ({"__type": "float", "value": "NaN"}, "bad float"),
    ({"__type": "scalar", "dtype": "<f4", "value": 1e39}, "out of range for <f4"),
    ({"__type": "scalar", "dtype": "|u1", "value": 256}, "out of range for |u1"),
    ({"__type": "scalar", "dtype": "|i1", "value": 1.0}, "must be an integer"),
    ({"__type": "scalar", "dtype": "|b1", "value": 1}, "true or false"),
    ({"__type": "scalar", "dtype": "<c8", "value": [1.0]}, r"\[real, imag\]"),
    ({"__type": "scalar", "dtype": "|O", "value": 1}, "unsupported dtype"),
    ({"__type": "tuple", "items": {}}, "must be a list"),
    ({"__type": "dict", "items": [[1]]}, r"\[key, value\] pairs"),
    ({"__type": "dict", "items": [[[1], 2]]}, "unhashable"),
    ({"__type": "bytes", "base64": "!!"}, "bad base64"),
    ({"__type": "pickle"}, "unknown __type"),
])
def test_malformed_values_are_format_errors(obj, match):
    with pytest.raises(FormatError, match=match):
        decode_value({"k": obj}, Bin().source)


def test_array_refs_finds_every_array_of_an_entry_in_document_order():
    from gym_recorder.format.values import array_refs

    stored: list[np.ndarray] = []

    def sink(a: np.ndarray) -> dict:
        stored.append(a)
        return {"__type": "ndarray", "dtype": a.dtype.str, "shape": list(a.shape),
                "offset": 8 * len(stored)}

    info = {"a": np.arange(3), "nested": [1, {"b": np.ones(2)}], "text": "x"}
    entry = {"observations": {"__type": "ndarray", "offset": 0}, "infos": [
        encode_value(info, sink, "info")], "options": None}
    refs = array_refs(entry)
    assert [r["offset"] for r in refs] == [0, 8, 16]  # the observations', then the infos'
    assert [r.get("shape") for r in refs[1:]] == [[3], [2]]
    more = array_refs({"x": [refs[0]]}, refs)
    assert more is refs and len(refs) == 4
