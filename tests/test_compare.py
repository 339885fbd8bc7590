"""gym_recorder.replay.compare on its own: what "the same" means when a replay is checked."""

import math

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from gym_recorder.replay.compare import first_difference, same_float, tree_row


def test_a_reseeded_cartpole_returns_the_same_and_a_step_apart_differs():
    a, b = gym.make("CartPole-v1"), gym.make("CartPole-v1")
    obs_a, _ = a.reset(seed=7)
    obs_b, _ = b.reset(seed=7)
    assert first_difference(obs_a, obs_b, "reset observation") is None
    step_a = a.step(1)[0]
    assert first_difference(step_a, b.step(1)[0], "observation") is None
    message = first_difference(step_a, b.step(0)[0], "observation")
    assert message is not None and message.startswith("observation: ")
    assert message.endswith("of 4 elements differ")
    a.close(), b.close()


def test_nan_equals_nan_but_not_a_number():
    assert first_difference(np.array([np.nan, 1.0]), np.array([np.nan, 1.0])) is None
    assert first_difference(math.nan, math.nan) is None
    assert first_difference(np.float32(np.nan), np.float32(0.0), "r") == "r: 0.0, recorded nan"
    assert same_float(math.nan, np.float64(np.nan)) and same_float(1.5, 1.5)
    assert not same_float(1.5, 1.5000001)


def test_graphs_and_containers_name_the_first_place_they_differ():
    space = spaces.Graph(spaces.Box(0, 1, (2,)), spaces.Discrete(3), seed=0)
    g = space.sample()
    assert first_difference(g, spaces.GraphInstance(g.nodes, g.edges, g.edge_links)) is None
    other = spaces.GraphInstance(g.nodes + 1, g.edges, g.edge_links)
    assert first_difference(g, other, "o").startswith("o.nodes: ")
    assert first_difference(g, (g.nodes, g.edges, g.edge_links), "o") == "o: not a graph"
    assert first_difference((1, [2, 3]), (1, [2, 4]), "t") == "t[1][1]: 4, recorded 3"
    assert first_difference((1, 2), (1,), "t") == "t: length differs"


def test_tree_row_takes_one_row_of_each_leaf_as_a_copy():
    tree = {"pos": np.arange(6.0).reshape(3, 2), "pair": (np.array([1, 2, 3]), ["a", "b", "c"])}
    row = tree_row(tree, 1)
    assert first_difference({"pos": np.array([2.0, 3.0]), "pair": (np.int64(2), "b")}, row) is None
    row["pos"][0] = -1
    assert tree["pos"][1, 0] == 2.0  # the recorded tree is not changed through the row
