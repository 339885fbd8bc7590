"""RecordingVectorWrapper combined with Gymnasium's vector wrappers, inside and outside it.

Inside (between the recorder and the vector env) the recorder records what the wrappers return;
outside, what the vector env returns to it. Either way the reader's episodes must equal the truth
reconstructed from deep copies of every call (``VectorTruth`` under the recorder, and
``reconstruct`` of tests/test_vector.py). ``DictInfoToList`` gives infos as a list of one dict per
sub-env; such calls are turned back into Gymnasium's dict form (object arrays with ``_key``
masks) before the reconstruction, which shares no code with the wrapper.

Replay makes each sub-env from the recorded spec, which is the innermost env's: a recording made
through a vector wrapper that changes the data is skipped by name (it used to be reported as a
mismatch of a deterministic env), and so is a Minari export's env spec; wrappers that only add
infos replay.
"""

from __future__ import annotations

import json
from typing import Any, Callable

import gymnasium as gym
import gymnasium.wrappers.vector as VW
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from needs import need_module
from test_vector import VectorTruth, check, drive, reconstruct

from gym_recorder import RecordingReader, RecordingVectorWrapper
from gym_recorder.replay.run import replay_recording

NEXT, SAME, DISABLED = AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED
MODES = [NEXT, SAME, DISABLED]


def as_vector_info(info: Any, n: int) -> Any:
    """A list info (one dict per sub-env) in Gymnasium's dict form; dicts pass unchanged."""
    if not isinstance(info, list):
        return info
    out: dict[str, Any] = {}
    for key in dict.fromkeys(k for d in info for k in d):
        has = np.array([key in d for d in info])
        if key == "final_info":
            out[key] = as_vector_info([d.get(key, {}) for d in info], n)
        else:
            values = np.empty(n, object)
            for i, d in enumerate(info):
                values[i] = d.get(key)
            out[key] = values
        out["_" + key] = has
    return out


def truth_episodes(truth: VectorTruth, env: gym.vector.VectorEnv) -> list:
    n = env.num_envs
    calls = [(*c[:-1], as_vector_info(c[-1], n)) for c in truth.calls]
    return reconstruct(calls, env)


def record_and_check(tmp_path, inner: gym.vector.VectorEnv, steps: int = 30,
                     outer: Callable[[Any], Any] | None = None) -> list:
    """Records ``inner`` (``outer`` wrapped around the recorder) through every kind of episode
    boundary, and compares every sub-env's episodes with the truth; returns the episodes."""
    truth = VectorTruth(inner)
    rec = RecordingVectorWrapper(truth, tmp_path / "rec", target_batch_bytes=6000)
    top = outer(rec) if outer is not None else rec
    drive(top, truth, steps) if outer is None else drive_outer(top, rec, steps)
    episodes = check(tmp_path, inner, truth_episodes(truth, inner))
    assert {ep.sub_env for ep in episodes} == set(range(inner.num_envs))
    return episodes


def drive_outer(top: Any, rec: RecordingVectorWrapper, steps: int) -> None:
    """:func:`drive`'s boundaries, through wrappers outside the recorder."""
    n = top.num_envs
    disabled = rec.autoreset_mode == "Disabled"
    top.action_space.seed(5)
    top.reset(seed=10)
    for phase in range(2):
        for t in range(steps):
            _, _, terms, truncs, _ = top.step(top.action_space.sample())
            mask = np.asarray(terms | truncs).copy()
            if disabled and t == steps // 2:
                mask[n - 1] = True
            if disabled and mask.any():
                top.reset(seed=1000 + t, options={"reset_mask": mask})
        if phase == 0:
            top.reset(seed=[20 + i for i in range(n)])
    top.close()


def make(env_id: str, mode: AutoresetMode, n: int, vec: str = "sync") -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=n, vectorization_mode=vec,
                        vector_kwargs={"autoreset_mode": mode})


# ---------------------------------------------------------------------------------------------
# DictInfoToList inside the recorder: infos as a list of one dict per sub-env


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_dict_info_to_list_inside_records_every_sub_env_info(tmp_path, mode, n):
    """It raised AttributeError ('list' object has no attribute 'items') at the first reset."""
    inner = VW.DictInfoToList(VW.RecordEpisodeStatistics(make("CartPole-v1", mode, n)))
    episodes = record_and_check(tmp_path, inner)
    if mode == DISABLED:  # (RecordEpisodeStatistics gives no statistics in this mode)
        return
    ended = [ep for ep in episodes if ep.end in ("terminated", "truncated")]
    assert ended
    stats = [info["episode"] for ep in episodes for info in ep.infos if "episode" in info]
    assert stats and all(type(s["r"]) is np.float64 and type(s["l"]) is np.int64 for s in stats)
    if mode == NEXT:  # (SAME_STEP: they are in the step's info, the next episode's reset info)
        assert all(int(ep.infos[-1]["episode"]["l"]) == ep.length for ep in ended)


def test_dict_info_to_list_same_step_keeps_final_observations_and_infos(tmp_path):
    inner = VW.DictInfoToList(make("sample_envs/ChangingInfo-v0", SAME, 3))
    episodes = record_and_check(tmp_path, inner, steps=40)
    assert any(ep.end in ("terminated", "truncated") for ep in episodes)


def test_a_list_info_of_the_wrong_length_is_a_named_error(tmp_path):
    from gym_recorder.errors import UnsupportedValueError

    class Shorten(gym.vector.VectorWrapper):
        def reset(self, **kwargs):
            obs, info = self.env.reset(**kwargs)
            return obs, [{"a": 1}]

    rec = RecordingVectorWrapper(Shorten(make("CartPole-v1", NEXT, 2)), tmp_path / "rec")
    with pytest.raises(UnsupportedValueError, match="list of 1 .*2 dicts"):
        rec.reset(seed=0)
    rec.close()


# ---------------------------------------------------------------------------------------------
# The matrix: vector wrappers inside and outside the recorder

WRAPPERS: dict[str, tuple[str, Callable[[Any], Any], tuple[AutoresetMode, ...]]] = {
    # name: (env id, wrap, the autoreset modes Gymnasium allows it in)
    "RecordEpisodeStatistics": ("CartPole-v1", VW.RecordEpisodeStatistics, (NEXT, SAME, DISABLED)),
    "NormalizeObservation": ("CartPole-v1", VW.NormalizeObservation, (NEXT,)),
    "NormalizeReward": ("Pendulum-v1", VW.NormalizeReward, (NEXT, SAME, DISABLED)),
    "ClipReward": ("Pendulum-v1", lambda e: VW.ClipReward(e, -1.0, 0.5), (NEXT, SAME, DISABLED)),
    "TransformObservation": ("CartPole-v1", lambda e: VW.TransformObservation(e, lambda o: o * 2),
                             (NEXT, DISABLED)),
    "FlattenObservation": ("sample_envs/NestedDict-v0", VW.FlattenObservation, (NEXT, DISABLED)),
    "DtypeObservation": ("MountainCarContinuous-v0",
                         lambda e: VW.DtypeObservation(e, np.float64), (NEXT, DISABLED)),
    "RescaleAction": ("Pendulum-v1", lambda e: VW.RescaleAction(e, -0.5, 0.5),
                      (NEXT, SAME, DISABLED)),
    "ClipAction": ("MountainCarContinuous-v0", VW.ClipAction, (NEXT, SAME, DISABLED)),
    "VectorizeTransformObservation": (
        "FrozenLake-v1", lambda e: VW.VectorizeTransformObservation(
            e, gym.wrappers.TransformObservation, func=lambda o: o + 1,
            observation_space=gym.spaces.Discrete(17)), (NEXT, DISABLED)),
    "GrayscaleObservation": ("sample_envs/Image-v0", VW.GrayscaleObservation, (NEXT, DISABLED)),
}
CASES = [(name, mode, n) for name, (_, _, modes) in WRAPPERS.items() for mode in modes
         for n in (1, 4)]


@pytest.mark.parametrize("name,mode,n", CASES, ids=[f"{w}-{m.value}-{n}" for w, m, n in CASES])
def test_wrapper_inside_the_recorder(tmp_path, name, mode, n):
    env_id, wrap, _ = WRAPPERS[name]
    record_and_check(tmp_path, wrap(make(env_id, mode, n)), steps=12 if "Image" in env_id else 30)


OUTSIDE = [(name, mode) for name in ("RecordEpisodeStatistics", "NormalizeObservation",
                                     "NormalizeReward", "ClipReward", "RescaleAction",
                                     "FlattenObservation")
           for mode in (NEXT, SAME) if mode in WRAPPERS[name][2]]


@pytest.mark.parametrize("name,mode", OUTSIDE, ids=[f"{w}-{m.value}" for w, m in OUTSIDE])
def test_wrapper_outside_the_recorder(tmp_path, name, mode):
    env_id, wrap, _ = WRAPPERS[name]
    record_and_check(tmp_path, make(env_id, mode, 3), outer=wrap)


@pytest.mark.parametrize("mode", [NEXT, SAME], ids=["NextStep", "SameStep"])
def test_async_with_wrappers_inside(tmp_path, mode):
    inner = VW.DictInfoToList(VW.RecordEpisodeStatistics(
        VW.ClipReward(make("Pendulum-v1", mode, 2, "async"), -1.0, 0.5)))
    record_and_check(tmp_path, inner, steps=15)


# ---------------------------------------------------------------------------------------------
# Replay and the env spec of a recording made through vector wrappers


def _record(directory, env: gym.vector.VectorEnv, steps: int = 40) -> None:
    with RecordingVectorWrapper(env, directory) as rec:
        rec.action_space.seed(1)
        rec.reset(seed=0)
        for _ in range(steps):
            rec.step(rec.action_space.sample())


REPLAYS = {
    # name: (make the recorded vector env, the wrapper replay must name, or None: it replays)
    "ClipReward": (lambda: VW.ClipReward(gym.make_vec("Pendulum-v1", 3, vectorization_mode="sync"),
                                         -1.0, 0.5), "ClipReward"),
    "NormalizeObservation": (lambda: VW.NormalizeObservation(
        gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")), "NormalizeObservation"),
    "RescaleAction-native": (lambda: VW.RescaleAction(
        gym.make_vec("Pendulum-v1", 3), -0.5, 0.5), "RescaleAction"),
    "RecordEpisodeStatistics": (lambda: VW.DictInfoToList(VW.RecordEpisodeStatistics(
        gym.make_vec("CartPole-v1", 3, vectorization_mode="sync"))), None),
    "RecordEpisodeStatistics-native": (lambda: VW.RecordEpisodeStatistics(
        gym.make_vec("CartPole-v1", 3)), None),
}


@pytest.mark.parametrize("name", list(REPLAYS))
def test_replay_names_the_vector_wrappers_it_cannot_rebuild(tmp_path, name):
    """Replay made the env without the vector wrappers and reported every episode of a
    deterministic env as a MISMATCH (ClipReward: 'reward -2.26, recorded -1.0')."""
    make_env, named = REPLAYS[name]
    _record(tmp_path / "rec", make_env())
    checks = list(replay_recording(tmp_path / "rec"))
    assert checks
    if named is None:
        assert {c.status for c in checks} == {"match"}
        return
    assert {c.status for c in checks} == {"skipped"}
    assert all(f"vector wrapper(s) {named} (gymnasium.wrappers.vector." in c.message
               for c in checks), checks[0].message
    with RecordingReader(tmp_path / "rec") as reader:
        [wrapper] = reader.writers[0]["manifest"]["env_spec"]["vector_wrappers"]
    assert wrapper["name"] == named and wrapper["entry_point"].endswith(":" + named)


def test_minari_export_leaves_out_the_spec_of_an_env_recorded_through_vector_wrappers(
        tmp_path, monkeypatch):
    """The dataset's env spec was plain Pendulum-v1 (same spaces), though every reward had been
    clipped: recover_environment() gave another env than the data's."""
    need_module("minari", 'pip install ".[minari]"')
    from gym_recorder.integrations.minari_io import export_minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari_root"))
    _record(tmp_path / "rec", VW.ClipReward(gym.make_vec("Pendulum-v1", 2,
                                                         vectorization_mode="sync"), -1.0, 0.5))
    result = export_minari(tmp_path / "rec", "test/clipped-v0")
    assert "vector wrapper(s) ClipReward" in (result["env_spec_dropped"] or "")


# ---------------------------------------------------------------------------------------------
# Values outside the space, from a wrapper inside the recorder


def _float64_observations(mode: AutoresetMode, n: int) -> gym.vector.VectorEnv:
    def to64(o):
        return o.astype(np.float64)

    if mode == SAME:  # (the vector TransformObservation refuses SAME_STEP: wrap each sub-env,
        # whose float64 final observations reach info["final_obs"] as they are)
        return gym.vector.SyncVectorEnv([lambda: gym.wrappers.TransformObservation(
            gym.make("CartPole-v1"), to64, None)] * n, autoreset_mode=mode)
    return VW.TransformObservation(make("CartPole-v1", mode, n), to64)


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
def test_float64_observations_in_a_float32_box_are_kept_and_warned_once(tmp_path, mode, n):
    """The vector recorder kept them exactly but never warned (a single env's recorder does)."""
    from gym_recorder.errors import OutsideSpaceWarning

    inner = _float64_observations(mode, n)
    truth = VectorTruth(inner)
    rec = RecordingVectorWrapper(truth, tmp_path / "rec", target_batch_bytes=3000)
    with pytest.warns(OutsideSpaceWarning) as caught:
        drive(rec, truth, 40)
    outside = [w for w in caught if issubclass(w.category, OutsideSpaceWarning)]
    assert len(outside) == 1 and outside[0].filename.endswith("test_vector.py")
    assert "observation: dtype float64 does not fit the space's float32" in str(outside[0].message)
    expected = truth_episodes(truth, inner)
    with RecordingReader(tmp_path / "rec") as reader:
        episodes = list(reader)
    assert len(episodes) == len(expected)
    for ep, t in zip(episodes, expected):
        assert ep.observations.dtype == np.float64 and ep.sub_env == t.sub_env
        assert np.array_equal(ep.observations, np.array(t.observations, np.float64))
    assert any(np.array(t.observations).dtype == np.float64 for t in expected)


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_vector_env_built_from_env_functions_records_its_sub_envs_spec(tmp_path, kind):
    """SyncVectorEnv / AsyncVectorEnv built from env functions (as CleanRL does) have no spec:
    the recording takes their sub-envs' spec (wrappers included), so it has an env id and its
    episodes replay; sub-envs of different specs leave it out, as before."""
    fns = [lambda: gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))] * 3
    cls = gym.vector.SyncVectorEnv if kind == "sync" else gym.vector.AsyncVectorEnv
    env = RecordingVectorWrapper(cls(fns), tmp_path / "rec")
    env.reset(seed=[1, 2, 3])
    for _ in range(40):
        env.step(env.action_space.sample())
    env.close()
    with RecordingReader(tmp_path / "rec") as reader:
        assert reader.env_id == "CartPole-v1" and len(reader) >= 3
    (manifest,) = (tmp_path / "rec").glob("*.manifest.json")
    spec = json.loads(manifest.read_bytes())["env_spec"]
    assert spec["kwargs"]["vectorization_mode"] == kind
    assert [w["name"] for w in spec["additional_wrappers"]] == ["RecordEpisodeStatistics"]
    checks = list(replay_recording(tmp_path / "rec"))
    assert checks and all(c.status == "match" for c in checks), [c.message for c in checks]
    mixed = [lambda: gym.make("CartPole-v1"),
             lambda: gym.make("CartPole-v1", sutton_barto_reward=True)]
    env = RecordingVectorWrapper(gym.vector.SyncVectorEnv(mixed), tmp_path / "mixed")
    env.reset(seed=0)
    env.step(env.action_space.sample())
    env.close()
    with RecordingReader(tmp_path / "mixed") as reader:
        assert reader.env_id is None
