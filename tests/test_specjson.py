"""An env spec's kwargs as JSON (gym_recorder.format.specjson): the wrapper arguments of real
Gymnasium wrappers go through JSON and come back equal, with their dtypes; what JSON cannot hold
is named, never silently dropped; a hostile tag is refused by name."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import FormatError
from gym_recorder.format.specjson import (MAX_ARRAY_ELEMENTS, MODULE_NAME_RE, decode_arg,
                                          encode_arg, split_kwargs)


def _through_json(kwargs: dict) -> tuple[dict, dict]:
    kept, missing = split_kwargs(kwargs)
    back = {k: decode_arg(v) for k, v in json.loads(json.dumps(kept, allow_nan=False)).items()}
    return back, missing


def test_wrapper_arguments_of_a_real_env_come_back_with_their_dtypes():
    env = gym.make("Pendulum-v1")
    env = gym.wrappers.RescaleAction(env, min_action=np.float32(-0.5),
                                     max_action=np.array([0.5], dtype=np.float32))
    env = gym.wrappers.ReshapeObservation(env, shape=(3, 1))
    env = gym.wrappers.TransformObservation(env, lambda o: o, env.observation_space)
    rescale, reshape, transform = env.spec.additional_wrappers

    back, missing = _through_json(rescale.kwargs)
    assert missing == {}
    assert type(back["min_action"]) is np.float32 and back["min_action"] == np.float32(-0.5)
    assert back["max_action"].dtype == np.float32 and back["max_action"].shape == (1,)
    assert back["max_action"].tolist() == [0.5]

    back, missing = _through_json(reshape.kwargs)
    assert back == {"shape": (3, 1)} and type(back["shape"]) is tuple  # (not JSON's list)

    back, missing = _through_json(transform.kwargs)
    space = back["observation_space"]
    assert space == transform.kwargs["observation_space"]  # (the reshaped Box, (3, 1))
    assert space.shape == (3, 1) and space.high[2, 0] == np.float32(8)
    assert list(missing) == ["func"] and missing["func"].startswith("<function")
    env.close()


def test_dtypes_and_dtype_classes_are_kept_apart():
    assert decode_arg(encode_arg(np.dtype("<u2"))) == np.dtype("<u2")
    assert decode_arg(encode_arg(np.uint8)) is np.uint8
    assert encode_arg({"a": [1, (2.5, "x")]}) == {"a": [1, {"__tuple__": [2.5, "x"]}]}


def test_what_json_cannot_hold_is_named_with_a_short_repr():
    big = np.zeros(MAX_ARRAY_ELEMENTS + 1)
    kept, missing = split_kwargs({"ok": 3, "big": big, "obj": object(), "nan": float("nan"),
                                  "keys": {1: "a"}})
    assert kept == {"ok": 3}
    assert sorted(missing) == ["big", "keys", "nan", "obj"]
    assert all(len(v) <= 200 for v in missing.values())
    with pytest.raises(TypeError):
        encode_arg({"__numpy__": "looks like a tag"})  # (would be read back as an array)


def test_hostile_tags_are_refused_by_name():
    with pytest.raises(FormatError, match="wrapper argument: unsupported dtype"):
        decode_arg({"__numpy__": "|O", "value": 1})
    with pytest.raises(FormatError, match="unsupported dtype"):
        decode_arg({"__dtype__": "V8"})
    with pytest.raises(ValueError, match="__tuple__ must hold a list"):
        decode_arg({"__tuple__": "ab"})


def test_module_names_are_dotted_identifiers_only():
    assert MODULE_NAME_RE.fullmatch("ale_py.env")
    for bad in ("../x", "os;rm", "a..b", ".a", "a/b", ""):
        assert not MODULE_NAME_RE.fullmatch(bad)
