"""Gymnasium's own single-env wrappers (gymnasium.wrappers.*) with the recorder outside and inside.

Each case records a few seeded episodes of a real env, compares every recorded value with deep
copies of what the env returned, checks the recording (verify), replays it where the recorded
spec can rebuild the wrapper stack, and reads it through ``transitions``. The regressions at the
end are bugs found with this matrix: wrapper arguments a JSON spec did not keep (a tuple shape, a
dtype), and Minari exports of wrapper stacks whose spec JSON cannot hold.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import wrappers as W

import sample_envs  # noqa: F401  (registers sample_envs/...)
from conftest import TruthCollector, TruthEpisode, assert_episode_matches
from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.integrity import verify
from gym_recorder.replay.run import replay_recording
from gym_recorder.training.transitions import transitions
from needs import need_module

mk = gym.make
TAXI = "Taxi-v4" if "Taxi-v4" in gym.registry else "Taxi-v3"  # (v4: gymnasium 1.3 on)


def _record_outside(env: gym.Env, directory: Any, episodes: int = 3,
                    steps: int = 40) -> tuple[RecordingWrapper, list[TruthEpisode]]:
    """Records ``episodes`` episodes (seeds 0, None, 2, ...) with the recorder outermost; the truth
    is a deep copy of each value the recorder handed back (exactly what the env returned)."""
    rec = RecordingWrapper(env, directory)
    collector = TruthCollector(rec)  # (outside the recorder: what it handed back)
    rec.action_space.seed(0)
    for e in range(episodes):
        collector.reset(seed=e if e % 2 == 0 else None)
        for _ in range(steps):
            *_, terminated, truncated, _ = collector.step(rec.action_space.sample())
            if terminated or truncated:
                break
    collector.close()
    return rec, collector.episodes


def _assert_recorded(directory: Any, truth: list, obs_space: gym.Space,
                     act_space: gym.Space) -> None:
    with RecordingReader(directory) as reader:
        assert len(reader) == len(truth)
        for i, t in enumerate(truth):
            assert_episode_matches(reader[i], t, obs_space, act_space, f"episode {i}")
        assert reader.observation_space == obs_space and reader.action_space == act_space
        t = transitions(reader)
        assert len(t.reward) == sum(len(x) for x in truth)
    assert [str(p) for p in verify(directory)] == []


def _half(x: Any) -> Any:
    return x * 0.5


# (case id, env factory, what replay gives: "match", or a substring of the skip reason)
OUTSIDE: list[tuple[str, Callable[[], gym.Env], str]] = [
    ("Flatten-Blackjack", lambda: W.FlattenObservation(mk("Blackjack-v1")), "match"),
    ("Flatten-NestedDict", lambda: W.FlattenObservation(
        mk("sample_envs/NestedDict-v0", episode_length=6)), "match"),
    ("Dtype-CartPole", lambda: W.DtypeObservation(mk("CartPole-v1"), np.float64), "match"),
    ("Reshape-CartPole", lambda: W.ReshapeObservation(mk("CartPole-v1"), (2, 2)), "match"),
    ("Rescale-Pendulum", lambda: W.RescaleObservation(mk("Pendulum-v1"), np.float32(-1),
                                                      np.float32(1)), "match"),
    ("Transform-CartPole", lambda: W.TransformObservation(mk("CartPole-v1"), _half, None),
     "wrapper TransformObservation"),
    ("Normalize-CartPole", lambda: W.NormalizeObservation(mk("CartPole-v1")), "match"),
    ("TimeAware-Pendulum", lambda: W.TimeAwareObservation(mk("Pendulum-v1"), flatten=False),
     "match"),
    ("FrameStack-CartPole", lambda: W.FrameStackObservation(mk("CartPole-v1"), 4), "match"),
    ("FrameStack-zero-Taxi", lambda: W.FrameStackObservation(mk(TAXI), 3,
                                                             padding_type="zero"), "match"),
    ("FrameStack-Image", lambda: W.FrameStackObservation(
        mk("sample_envs/Image-v0", height=6, width=6), 2), "match"),
    ("Delay-CartPole", lambda: W.DelayObservation(mk("CartPole-v1"), 2), "match"),
    ("MaxAndSkip-Image", lambda: W.MaxAndSkipObservation(
        mk("sample_envs/Image-v0", height=6, width=6), 2), "match"),
    ("Grayscale-Image", lambda: W.GrayscaleObservation(
        mk("sample_envs/Image-v0", height=6, width=6), keep_dim=True), "match"),
    ("AddRender-CartPole", lambda: W.AddRenderObservation(
        mk("CartPole-v1", render_mode="rgb_array"), render_only=False), "match"),
    ("ClipAction-MountainCarContinuous", lambda: W.ClipAction(mk("MountainCarContinuous-v0")),
     "match"),
    ("RescaleAction-Pendulum", lambda: W.RescaleAction(mk("Pendulum-v1"), -1.0, 1.0), "match"),
    ("Sticky-Acrobot", lambda: W.StickyAction(mk("Acrobot-v1"), 0.25), "match"),
    ("DiscretizeAction-Pendulum", lambda: W.DiscretizeAction(mk("Pendulum-v1"), 5), "match"),
    ("ClipReward-CartPole", lambda: W.ClipReward(mk("CartPole-v1"), 0.0, 0.5), "match"),
    ("NormalizeReward-Pendulum", lambda: W.NormalizeReward(mk("Pendulum-v1")), "match"),
    ("TransformReward-FrozenLake", lambda: W.TransformReward(mk("FrozenLake-v1"), _half),
     "wrapper TransformReward"),
    ("EpisodeStatistics-CartPole", lambda: W.RecordEpisodeStatistics(mk("CartPole-v1")),
     "match"),
    ("TimeLimit-Pendulum", lambda: W.TimeLimit(mk("Pendulum-v1"), 15), "match"),
]


@pytest.mark.parametrize("make, replay", [c[1:] for c in OUTSIDE], ids=[c[0] for c in OUTSIDE])
def test_recorder_outside_a_gymnasium_wrapper(tmp_path, make, replay):
    """Every value comes back exactly; replay rebuilds the stack from the recorded spec, or
    skips naming the wrapper it cannot rebuild."""
    rec, truth = _record_outside(make(), tmp_path)
    _assert_recorded(tmp_path, truth, rec.observation_space, rec.action_space)
    checks = list(replay_recording(tmp_path))
    assert len(checks) == len(truth)
    if replay == "match":
        assert all(c.status == "match" for c in checks), [c.message for c in checks]
    else:
        assert all(c.status == "skipped" and replay in c.message for c in checks), \
            [c.message for c in checks]


def test_episode_statistics_info_is_recorded_with_its_numpy_values(tmp_path):
    rec, truth = _record_outside(W.RecordEpisodeStatistics(mk("CartPole-v1")), tmp_path,
                                 episodes=2, steps=500)
    with RecordingReader(tmp_path) as reader:
        last = reader[0].infos[-1]["episode"]
    assert set(last) == {"r", "l", "t"} and last["l"] == len(truth[0])
    assert type(last["r"]) is type(truth[0].infos[-1]["episode"]["r"])


# (case id, inner env factory, the wrappers put around the recorder)
INSIDE: list[tuple[str, Callable[[], gym.Env], Callable[[gym.Env], gym.Env]]] = [
    ("FrameStack", lambda: mk("CartPole-v1"), lambda r: W.FrameStackObservation(r, 4)),
    ("Normalize", lambda: mk("CartPole-v1"), W.NormalizeObservation),
    ("Autoreset", lambda: mk("CartPole-v1"), W.Autoreset),
    ("EpisodeStatistics", lambda: mk(TAXI), W.RecordEpisodeStatistics),
    ("TimeLimit", lambda: mk("Pendulum-v1"), lambda r: W.TimeLimit(r, 12)),
    ("RescaleAction", lambda: mk("Pendulum-v1"), lambda r: W.RescaleAction(r, -1.0, 1.0)),
    ("MaxAndSkip", lambda: mk("sample_envs/Image-v0", height=6, width=6),
     lambda r: W.MaxAndSkipObservation(r, 3)),
    ("AddRender", lambda: mk("CartPole-v1", render_mode="rgb_array"), W.AddRenderObservation),
]


@pytest.mark.parametrize("inner, outer", [c[1:] for c in INSIDE], ids=[c[0] for c in INSIDE])
def test_recorder_inside_a_gymnasium_wrapper(tmp_path, inner, outer):
    """The recorder records what the env below it returned, whatever the wrappers above do
    (Autoreset's steps after the end start new episodes; AddRenderObservation's reset in its
    constructor is an episode too)."""
    truth = TruthCollector(inner())
    rec = RecordingWrapper(truth, tmp_path)
    env = outer(rec)
    env.action_space.seed(0)
    for e in range(3):
        env.reset(seed=e if e % 2 == 0 else None)
        for _ in range(40):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                break
    env.close()
    _assert_recorded(tmp_path, truth.episodes, rec.observation_space, rec.action_space)
    checks = list(replay_recording(tmp_path))
    assert {c.status for c in checks} <= {"match", "skipped"} and "match" in \
        {c.status for c in checks}, [c.message for c in checks]


@pytest.mark.parametrize("how", ["deepcopy", "pickle"])
@pytest.mark.parametrize("inside", [False, True], ids=["outside", "inside"])
def test_copies_of_a_wrapper_stack_record_as_new_writers(tmp_path, how, inside):
    env: gym.Env
    if inside:
        env = W.FrameStackObservation(RecordingWrapper(mk("CartPole-v1"), tmp_path), 3)
    else:
        env = RecordingWrapper(W.FrameStackObservation(mk("CartPole-v1"), 3), tmp_path)
    env.reset(seed=0)
    for _ in range(4):
        env.step(0)
    twin = copy.deepcopy(env) if how == "deepcopy" else pickle.loads(pickle.dumps(env))
    with pytest.warns(UserWarning, match="copy made mid-episode"):
        twin.step(1)
    twin.reset(seed=7)
    for _ in range(3):
        twin.step(1)
    twin.close()
    env.step(0)
    env.close()
    with RecordingReader(tmp_path) as reader:
        got = sorted((len(reader[i]), reader[i].seed) for i in range(len(reader)))
    assert got == [(3, 7), (5, 0)]
    assert verify(tmp_path) == []


# -- regressions ---------------------------------------------------------------------------------

def test_a_tuple_argument_is_rebuilt_as_a_tuple(tmp_path):
    """ReshapeObservation(shape=(2, 2)): the spec kept the shape as a JSON list, and replay
    failed as a whole (ReplayError: "ReshapeObservation requires shape to be a tuple")."""
    _record_outside(W.ReshapeObservation(mk("CartPole-v1"), (2, 2)), tmp_path, steps=10)
    checks = list(replay_recording(tmp_path))
    assert checks and all(c.status == "match" for c in checks), [c.message for c in checks]
    rec = RecordingWrapper(W.ReshapeObservation(mk("CartPole-v1"), (2, 2)), tmp_path / "again")
    again = gym.make(rec.spec)  # (the live spec, as the README says; no JSON involved)
    assert again.observation_space.shape == (2, 2)
    again.close()
    rec.close()


def test_a_dtype_argument_is_recorded(tmp_path):
    """DtypeObservation(dtype=np.float64): the dtype was "not recorded (not JSON)", so replay
    skipped every episode."""
    _record_outside(W.DtypeObservation(mk("CartPole-v1"), np.float64), tmp_path, steps=10)
    with RecordingReader(tmp_path) as reader:
        (w,) = reader.writers[0]["manifest"]["env_spec"]["additional_wrappers"]
        assert reader[0].observations.dtype == np.float64
    assert "missing_kwargs" not in w
    checks = list(replay_recording(tmp_path))
    assert checks and all(c.status == "match" for c in checks), [c.message for c in checks]


def test_minari_export_of_numpy_wrapper_arguments_keeps_the_data(tmp_path, minari_root):
    """RescaleObservation(min_obs=np.float32(-1), ...): Minari stores the env spec as
    EnvSpec.to_json(), which raised TypeError ("Object of type float32 is not JSON
    serializable") from inside Minari and exported nothing."""
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder.integrations.minari_io import export_minari

    _record_outside(W.RescaleObservation(mk("Pendulum-v1"), np.float32(-1), np.float32(1)),
                    tmp_path / "rec", episodes=2, steps=8)
    result = export_minari(tmp_path / "rec", "test/rescale-v0")
    assert result["episodes"] == 2
    assert "RescaleObservation" in result["env_spec_dropped"]
    ds = minari.load_dataset("test/rescale-v0")
    assert ds.env_spec is None and ds.total_steps == 16
    with RecordingReader(tmp_path / "rec") as reader:
        np.testing.assert_array_equal(next(ds.iterate_episodes()).observations,
                                      reader[0].observations)


@pytest.mark.parametrize("wrap, name", [
    (lambda e: W.TransformReward(e, _half), "TransformReward"),
    (lambda e: W.TransformObservation(e, _half, None), "TransformObservation"),
    (lambda e: W.ReshapeObservation(e, (2, 2)), "ReshapeObservation"),
], ids=["TransformReward", "TransformObservation", "Reshape"])
def test_minari_export_leaves_out_an_env_spec_that_is_not_the_recorded_env(tmp_path,
                                                                           minari_root, wrap,
                                                                           name):
    """A wrapper replay cannot rebuild but that keeps the spaces (TransformReward,
    TransformObservation without a new space) was silently left out of the dataset's env spec:
    recover_environment() gave the bare env, whose rewards and observations are not the
    dataset's. ReshapeObservation's spec does not survive Minari's JSON (its shape comes back a
    list, which the wrapper refuses): recover_environment() raised."""
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder.integrations.minari_io import export_minari

    _record_outside(wrap(mk("CartPole-v1")), tmp_path / "rec", episodes=2, steps=8)
    result = export_minari(tmp_path / "rec", f"test/{name.lower()}-v0")
    assert name in (result["env_spec_dropped"] or ""), result
    ds = minari.load_dataset(f"test/{name.lower()}-v0")
    assert ds.env_spec is None and ds.total_episodes == 2


def test_minari_export_keeps_a_rebuildable_wrapper_stack(tmp_path, minari_root):
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder.integrations.minari_io import export_minari

    _record_outside(W.FrameStackObservation(W.ClipReward(mk("CartPole-v1"), 0.0, 0.5), 3),
                    tmp_path / "rec", episodes=2, steps=8)
    result = export_minari(tmp_path / "rec", "test/stack-v0")
    assert result["env_spec_dropped"] is None
    ds = minari.load_dataset("test/stack-v0")
    assert [w.name for w in ds.env_spec.additional_wrappers] == ["ClipReward",
                                                                 "FrameStackObservation"]
    env = ds.recover_environment()
    assert env.observation_space == ds.observation_space
    env.close()


def test_npz_export_of_observations_outside_the_space_names_the_cause(tmp_path):
    """TransformObservation without a new space: (3,) rows for a (4,) Box, every row alike,
    export as one array of them (issue 33 §2); rows of two shapes are refused naming the cause
    (it said "a leaf of this space (Sequence, Graph or OneOf)", which a Box is not)."""
    from gym_recorder.integrations.export import ExportError, export_npz

    with pytest.warns(UserWarning, match="does not match the space's shape"):
        _record_outside(W.TransformObservation(mk("CartPole-v1"), lambda o: o[:3], None),
                        tmp_path / "rec", episodes=1, steps=5)
    export_npz(tmp_path / "rec", tmp_path / "out.npz")
    with RecordingReader(tmp_path / "rec") as reader, np.load(tmp_path / "out.npz") as z:
        assert z["observations"].shape == (6, 3)
        assert np.array_equal(z["observations"], reader[0].observations)
    flip = iter(range(1000))
    with pytest.warns(UserWarning, match="does not match the space's shape"):
        _record_outside(W.TransformObservation(mk("CartPole-v1"),
                                               lambda o: o[:3] if next(flip) % 2 else o, None),
                        tmp_path / "mixed", episodes=1, steps=5)
    with pytest.raises(ExportError, match="outside the space") as e:
        export_npz(tmp_path / "mixed", tmp_path / "mixed.npz")
    assert "observations" in str(e.value)


def test_resize_observation(tmp_path):
    need_module("cv2", 'pip install ".[test]" (opencv-python-headless, for ResizeObservation)')
    rec, truth = _record_outside(W.ResizeObservation(
        mk("sample_envs/Image-v0", height=12, width=12), (6, 6)), tmp_path, episodes=2, steps=5)
    _assert_recorded(tmp_path, truth, rec.observation_space, rec.action_space)
    assert all(c.status == "match" for c in replay_recording(tmp_path))


def test_record_video_inside_the_recorder(tmp_path):
    need_module("moviepy", 'pip install ".[test]" (moviepy, for RecordVideo)')
    env = W.RecordVideo(mk("CartPole-v1", render_mode="rgb_array"), str(tmp_path / "video"))
    rec, truth = _record_outside(env, tmp_path / "rec", episodes=2, steps=10)
    _assert_recorded(tmp_path / "rec", truth, rec.observation_space, rec.action_space)
