"""gym_recorder.format.spaces on its own: space descriptions, rebuilt spaces and the layout of leaves."""

import json

import numpy as np
import pytest
from gymnasium import spaces

from gym_recorder import FormatError
from gym_recorder.format import MAX_NESTING
from gym_recorder.format.spaces import (ArrayLeaf, DictNode, Layout, TupleNode, ValuesLeaf, build_space,
                                 decode_values_leaf, describe_space)

SPACES = [
    spaces.Box(-1.0, 1.0, (3, 2), np.float32),
    spaces.Box(np.array([0, -np.inf]), np.array([np.inf, 5.0]), dtype=np.float64),
    spaces.Box(0, 255, (4, 4, 3), np.uint8),
    spaces.Discrete(5, start=-2),
    spaces.MultiDiscrete([[2, 3], [4, 5]]),
    spaces.MultiBinary([2, 3]),
    spaces.Text(max_length=7, min_length=1),
    spaces.Dict({"pos": spaces.Box(-1, 1, (2,)), "inner": spaces.Dict({"k": spaces.Discrete(3)}),
                 "t": spaces.Tuple((spaces.Discrete(2), spaces.MultiBinary(4)))}),
    spaces.Tuple((spaces.Box(0, 1, (1,)), spaces.Text(3))),
    spaces.Sequence(spaces.Discrete(4), stack=True),
    spaces.Graph(spaces.Box(0, 1, (2,)), spaces.Discrete(3)),
    spaces.OneOf((spaces.Discrete(2), spaces.Box(0, 1, (2,)))),
    spaces.Box(0, 1, (2, 0), np.float32),  # no elements: bounds [] whatever the shape
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_descriptions_are_json_and_rebuild_the_same_space(space):
    desc = describe_space(space)
    again = json.loads(json.dumps(desc, allow_nan=False))  # strict JSON: no NaN or Infinity
    assert again == desc
    assert build_space(again) == space


def test_an_int64_discrete_rebuilds_where_discrete_takes_no_dtype(monkeypatch):
    """Gymnasium before 1.2.2: Discrete(n, seed=None, start=0), every one int64 (was a TypeError)."""
    class OldDiscrete(spaces.Discrete):
        def __init__(self, n, seed=None, start=0):
            super().__init__(n, seed=seed, start=start)

    monkeypatch.setattr(spaces, "Discrete", OldDiscrete)
    space = build_space({"type": "Discrete", "n": 3, "start": -1, "dtype": "<i8"})
    assert isinstance(space, OldDiscrete) and space.n == 3 and space.start == -1
    assert space.dtype == np.int64
    with pytest.raises(FormatError, match="cannot rebuild Discrete space"):  # int32: this one cannot
        build_space({"type": "Discrete", "n": 3, "start": 0, "dtype": "<i4"})


def test_uniform_box_bounds_are_one_number_and_others_nested_lists():
    uniform = describe_space(spaces.Box(0, 255, (84, 84, 3), np.uint8))
    assert (uniform["low"], uniform["high"]) == (0, 255)
    mixed = describe_space(spaces.Box(np.array([0.0, -np.inf]), np.array([1.5, np.inf]),
                                      dtype=np.float64))
    assert mixed["low"] == [0.0, "-inf"] and mixed["high"] == [1.5, "inf"]


def test_unknown_spaces_are_described_as_unknown():
    class Odd(spaces.Space):
        pass

    desc = describe_space(Odd())
    assert desc["type"] == "unknown"
    assert isinstance(Layout(desc).root, ValuesLeaf)


def test_layout_leaves_in_depth_first_order():
    layout = Layout(describe_space(SPACES[7]))
    assert not layout.single
    assert isinstance(layout.root, DictNode)
    assert layout.root.keys == ["inner", "pos", "t"]  # gymnasium sorts Dict keys
    kinds = [(type(leaf).__name__, getattr(leaf, "shape", None)) for leaf in layout.leaves]
    assert kinds == [("ArrayLeaf", ()), ("ArrayLeaf", (2,)), ("ArrayLeaf", ()),
                     ("ArrayLeaf", (4,))]
    assert [leaf.dtype for leaf in layout.leaves] == [np.int64, np.float32, np.int64, np.int8]
    assert isinstance(layout.root.children[2], TupleNode)


def test_flatten_and_unflatten_are_inverse():
    space = SPACES[7]
    layout = Layout(describe_space(space))
    value = space.sample()
    flat = layout.flattener()(value)
    assert len(flat) == len(layout.leaves)
    back = layout.unflatten(flat)
    assert back.keys() == value.keys() and back["inner"]["k"] == value["inner"]["k"]
    np.testing.assert_array_equal(back["pos"], value["pos"])
    assert isinstance(back["t"], tuple)
    np.testing.assert_array_equal(back["t"][1], value["t"][1])


def test_flattening_a_tuple_of_the_wrong_length_says_so():
    layout = Layout(describe_space(SPACES[8]))
    with pytest.raises(ValueError, match="expected 2 items, got 1"):
        layout.flattener()((np.zeros(1),))


def test_single_leaf_layouts():
    layout = Layout(describe_space(SPACES[0]))
    assert layout.single and isinstance(layout.root, ArrayLeaf)
    assert layout.root.shape == (3, 2) and layout.root.dtype == np.float32
    assert Layout(describe_space(SPACES[6])).root.kind == "Text"
    seq = Layout(describe_space(SPACES[9])).root
    assert seq.kind == "Sequence" and seq.stack is True


def test_tree_leaves_follow_the_space_and_name_what_is_wrong():
    layout = Layout(describe_space(SPACES[7]))
    tree = {"inner": {"k": "A"}, "pos": "B", "t": ["C", "D"], "extra": "ignored"}
    assert [obj for obj, _ in layout.tree_leaves(tree, "obs")] == ["A", "B", "C", "D"]
    assert [w for _, w in layout.tree_leaves(tree, "obs")] == [
        "obs['inner']['k']", "obs['pos']", "obs['t'][0]", "obs['t'][1]"]
    with pytest.raises(FormatError, match=r"obs\['inner'\]: missing key 'k'"):
        layout.tree_leaves({"inner": {}, "pos": 1, "t": [1, 2]}, "obs")
    with pytest.raises(FormatError, match=r"obs\['t'\]: expected a list of 2 for a Tuple space"):
        layout.tree_leaves({"inner": {"k": 1}, "pos": 1, "t": [1]}, "obs")
    with pytest.raises(FormatError, match="obs: expected an object for a Dict space"):
        layout.tree_leaves([1, 2], "obs")


@pytest.mark.parametrize("desc, match", [
    ([], "a space must be a JSON object"),
    ({"type": "Nope"}, "unknown space type 'Nope'"),
    ({"type": "Dict", "spaces": [["a"]]}, r"Dict spaces must be \[key, space\] pairs"),
    ({"type": "Tuple", "spaces": {}}, "Tuple spaces must be a list"),
    ({"type": "Box", "dtype": "|O", "shape": [1]}, "unsupported dtype"),
    ({"type": "MultiDiscrete", "nvec": [[1, 2], [3]], "dtype": "<i8"}, "not a rectangular"),
])
def test_bad_descriptions_are_format_errors(desc, match):
    with pytest.raises(FormatError, match=match):
        Layout(desc, "manifest observation_space")


def test_nesting_is_bounded():
    desc: dict = {"type": "Discrete", "n": 2}
    for _ in range(MAX_NESTING + 1):
        desc = {"type": "Tuple", "spaces": [desc]}
    with pytest.raises(FormatError, match="spaces nested too deeply"):
        Layout(desc)


def test_values_leaves_decode_rows():
    def no_arrays(obj, where):
        raise AssertionError("no array expected")

    text = ValuesLeaf("Text")
    assert decode_values_leaf(text, {"__type": "values", "values": ["ab", ""]}, no_arrays,
                              "w") == ["ab", ""]
    with pytest.raises(FormatError, match="w: Text rows must be strings"):
        decode_values_leaf(text, {"__type": "values", "values": [1]}, no_arrays, "w")
    with pytest.raises(FormatError, match=r"w: expected \{'__type': 'values'"):
        decode_values_leaf(text, ["ab"], no_arrays, "w")
    seq = ValuesLeaf("Sequence")
    rows = decode_values_leaf(seq, {"__type": "values", "values": [
        {"__type": "tuple", "items": [1, 2]}]}, no_arrays, "w")
    assert rows == [(1, 2)]
