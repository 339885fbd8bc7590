"""RecordingVectorWrapper: every sub-env's episodes, in every autoreset mode, read back exactly.

The ground truth is collected by :class:`VectorTruth`, a plain ``VectorWrapper`` placed *under* the
recorder: it deep-copies everything the vector env returns the moment it returns it, and every
action, seed and option it is handed. :func:`reconstruct` then rebuilds each sub-env's episodes
from those raw vector values, with this file's own reading of Gymnasium's autoreset modes and
vector info dicts (it shares no code with the wrapper), and the reader's episodes must equal
them one by one: observations, actions, rewards, flags, infos, sub_env, seeds, options, ends.
"""

from __future__ import annotations

import copy
import glob
import json
import os
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import TruthEpisode, assert_episode_matches, assert_same
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorWrapper
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from gym_recorder import RecordingReader, RecordingVectorWrapper, RecordingWrapper
from gym_recorder.errors import RecordingClosedError
from gym_recorder.errors import ResetNeeded

MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP, AutoresetMode.DISABLED]
NUM_ENVS = 3
SMALL_BATCH = 6000  # bytes: many batches, so episodes are cut into parts and stitched


class VectorTruth(VectorWrapper):
    """Deep copies of every call passing between the recorder and the vector env below it.

    Attributes:
        calls: ``("reset", seed, options, mask, obs, info)`` and
            ``("step", actions, obs, rewards, terminations, truncations, info)`` tuples.
        last: the exact objects the env returned last (to check the recorder passes them on).
    """

    def __init__(self, env: gym.vector.VectorEnv) -> None:
        super().__init__(env)
        self.calls: list[tuple] = []
        self.last: tuple | None = None

    def reset(self, *, seed=None, options=None):
        mask = None
        if options is not None and "reset_mask" in options:
            mask = options["reset_mask"].copy()
        sub_options = None if options is None else copy.deepcopy(
            {k: v for k, v in options.items() if k != "reset_mask"})
        result = self.env.reset(seed=seed, options=options)
        self.last = result
        self.calls.append(("reset", seed, sub_options, mask, *copy.deepcopy(result)))
        return result

    def step(self, actions):
        acts = copy.deepcopy(actions)
        result = self.env.step(actions)
        self.last = result
        self.calls.append(("step", acts, *copy.deepcopy(result)))
        return result


# ---------------------------------------------------------------------------------------------
# The independent reconstruction


def split_info(info: dict, n: int) -> list[dict]:
    """This file's own reading of a vector info dict: one dict per sub-env."""
    per_env: list[dict] = [dict() for _ in range(n)]
    masks = {k[1:] for k, v in info.items()
             if isinstance(k, str) and k.startswith("_") and k[1:] in info
             and isinstance(v, np.ndarray) and v.dtype == bool}
    for key, value in info.items():
        if isinstance(key, str) and key.startswith("_") and key[1:] in masks:
            continue
        has = info["_" + key] if key in masks else np.ones(n, bool)
        inner = split_info(value, n) if isinstance(value, dict) else None
        for i in range(n):
            if has[i]:
                per_env[i][key] = inner[i] if inner is not None else value[i]
    return per_env


def row(tree: Any, i: int, space: gym.Space) -> Any:
    """Sub-env ``i``'s value of a batched observation or action of the single ``space``."""
    if isinstance(space, spaces.Dict):
        return {k: row(tree[k], i, s) for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        return tuple(row(v, i, s) for v, s in zip(tree, space.spaces))
    return tree[i]  # an array's row; for Text, Sequence, ...: the i-th of a tuple


def reconstruct(calls: list[tuple], env: gym.vector.VectorEnv) -> list[TruthEpisode]:
    """Each sub-env's episodes from the raw vector calls, in the order they started."""
    n, mode = env.num_envs, env.metadata["autoreset_mode"]
    obs_space, act_space = env.single_observation_space, env.single_action_space
    episodes: list[TruthEpisode] = []
    current: list[TruthEpisode | None] = [None] * n
    autoreset = [False] * n

    def start(i, obs, info, seed, options):
        ep = TruthEpisode(obs, info, seed, options)
        ep.sub_env = i
        episodes.append(ep)
        current[i] = ep

    def add(i, action, obs, reward, term, trunc, info):
        ep = current[i]
        ep.actions.append(action)
        ep.observations.append(obs)
        ep.rewards.append(reward)
        ep.terminations.append(bool(term))
        ep.truncations.append(bool(trunc))
        ep.infos.append(info)
        if term or trunc:
            ep.end = "terminated" if term else "truncated"
            current[i] = None

    for call in calls:
        if call[0] == "reset":
            _, seed, options, mask, obs, info = call
            infos = split_info(info, n)
            for i in range(n):
                if mask is not None and not mask[i]:
                    continue
                if current[i] is not None:
                    current[i].end = "reset"
                s = None if seed is None else (seed + i if isinstance(seed, int) else seed[i])
                start(i, row(obs, i, obs_space), infos[i], s, options)
                autoreset[i] = False
            continue
        _, actions, obs, rewards, terms, truncs, info = call
        finals = {}
        if mode == AutoresetMode.SAME_STEP and "final_obs" in info:
            final_infos = split_info(info["final_info"], n)
            for i in np.flatnonzero(info["_final_obs"]):
                finals[i] = (info["final_obs"][i], final_infos[i])
            info = {k: v for k, v in info.items()
                    if k not in ("final_obs", "_final_obs", "final_info", "_final_info")}
        infos = split_info(info, n)
        for i in range(n):
            if mode == AutoresetMode.NEXT_STEP and autoreset[i]:
                # A reset step: not a transition; the observation starts the next episode.
                start(i, row(obs, i, obs_space), infos[i], None, None)
                autoreset[i] = False
                continue
            if i in finals:
                final_obs, final_info = finals[i]
                add(i, row(actions, i, act_space), final_obs, rewards[i], terms[i], truncs[i],
                    final_info)
                start(i, row(obs, i, obs_space), infos[i], None, None)
                continue
            add(i, row(actions, i, act_space), row(obs, i, obs_space), rewards[i], terms[i],
                truncs[i], infos[i])
            autoreset[i] = bool(terms[i] or truncs[i])
    for ep in current:
        if ep is not None:
            ep.end = "close"
    return episodes


# ---------------------------------------------------------------------------------------------
# Driving


def make(env_id: str, mode: AutoresetMode, vectorization: str = "sync",
         n: int = NUM_ENVS, **kwargs: Any) -> gym.vector.VectorEnv:
    return gym.make_vec(env_id, num_envs=n, vectorization_mode=vectorization,
                        vector_kwargs={"autoreset_mode": mode}, **kwargs)


def drive(rec: RecordingVectorWrapper, truth: VectorTruth, steps: int, *,
          options: dict | None = None) -> None:
    """Steps with a seeded random policy through every kind of boundary, then closes.

    Resets with an int seed, steps (DISABLED: resets ended sub-envs with reset_mask, alternately
    with a seed, and once resets a running sub-env early), flushes, resets all early with a
    list of seeds and options, steps again, and closes with episodes still open.
    """
    n = rec.num_envs
    disabled = rec.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    rec.action_space.seed(5)
    out = rec.reset(seed=10)
    assert out is truth.last
    masked = 0
    for phase in range(2):
        for t in range(steps):
            out = rec.step(rec.action_space.sample())
            assert out is truth.last  # exactly what the inner env returned, untouched
            _, _, terms, truncs, _ = out
            if disabled:
                mask = terms | truncs
                if t == steps // 2:
                    mask[n - 1] = True  # an early reset of a running sub-env
                if mask.any():
                    masked += 1
                    seed = 1000 + t if masked % 2 else None
                    out = rec.reset(seed=seed, options={"reset_mask": mask})
                    assert out is truth.last
        if phase == 0:
            rec.flush()
            out = rec.reset(seed=[20 + i for i in range(n)], options=options)
            assert out is truth.last
    rec.close()


def record(tmp_path, env: gym.vector.VectorEnv, steps: int, *, options: dict | None = None,
           **kwargs: Any) -> tuple[VectorTruth, list[TruthEpisode]]:
    truth = VectorTruth(env)
    rec = RecordingVectorWrapper(truth, tmp_path / "rec", **kwargs)
    drive(rec, truth, steps, options=options)
    mode = env.metadata["autoreset_mode"]
    return truth, reconstruct(truth.calls, env)


def check(tmp_path, env: gym.vector.VectorEnv, expected: list[TruthEpisode]) -> list:
    """The reader's episodes equal the reconstructed ones, episode by episode."""
    with RecordingReader(tmp_path / "rec") as reader:
        assert reader.observation_space == env.single_observation_space
        assert reader.action_space == env.single_action_space
        episodes = list(reader)
    assert len(episodes) == len(expected)
    for k, (ep, t) in enumerate(zip(episodes, expected)):
        assert_episode_matches(ep, t, env.single_observation_space, env.single_action_space,
                               f"episode {k}")
        assert ep.sub_env == t.sub_env, f"episode {k}: sub_env {ep.sub_env} != {t.sub_env}"
        assert ep.no_reset is False
    return episodes


def manifest_and_batches(directory) -> tuple[dict, list[dict]]:
    [path] = glob.glob(os.path.join(directory, "*.manifest.json"))
    with open(path, "rb") as f:
        manifest = json.load(f)
    batches = []
    for b in manifest["batches"]:
        with open(os.path.join(directory, b["fn"]), "rb") as f:
            batches.append(json.load(f))
    return manifest, batches


def check_batch_structure(directory, num_envs: int,
                          mode: AutoresetMode) -> tuple[dict, list[dict]]:
    """Counting and stitching conventions the reader relies on hold in the files."""
    manifest, batches = manifest_and_batches(directory)
    assert manifest["vector"] == {"num_envs": num_envs, "autoreset_mode": mode.value}
    assert manifest["complete"] is True
    next_episode = 0
    for k, (info, batch) in enumerate(zip(manifest["batches"], batches)):
        entries = batch["episodes"]
        starts = [e["episode"] for e in entries if e["part"] == 0]
        assert info["episodes"] == len(starts)
        assert starts == list(range(next_episode, next_episode + len(starts)))
        next_episode += len(starts)
        assert info["steps"] == sum(e["steps"] for e in entries)
        for e in entries:
            assert isinstance(e["sub_env"], int) and 0 <= e["sub_env"] < num_envs
            if e["continues"]:
                assert e["end"] is None
                following = {(x["episode"], x["part"]) for x in batches[k + 1]["episodes"]}
                assert (e["episode"], e["part"] + 1) in following
            else:
                assert e["end"] in ("terminated", "truncated", "reset", "close")
    return manifest, batches


# ---------------------------------------------------------------------------------------------
# The matrix: every autoreset mode x Sync/Async x CartPole/Dict observations

CASES = [(env_id, mode, vec) for vec in ("sync", "async") for env_id in
         ("CartPole-v1", "sample_envs/NestedDict-v0") for mode in MODES]


@pytest.mark.parametrize("env_id,mode,vectorization", CASES,
                         ids=[f"{v}-{e.split('/')[-1]}-{m.value}" for e, m, v in CASES])
def test_reader_equals_independent_ground_truth(tmp_path, env_id, mode, vectorization):
    env = make(env_id, mode, vectorization)
    steps = 70 if vectorization == "sync" else 40
    options = {"low": -0.01, "high": 0.01} if env_id == "CartPole-v1" else {"note": "x"}
    truth, expected = record(tmp_path, env, steps, options=options,
                             target_batch_bytes=SMALL_BATCH)
    episodes = check(tmp_path, env, expected)
    manifest, batches = check_batch_structure(tmp_path / "rec", NUM_ENVS, mode)
    # Several batches, with episodes cut into parts that the reader stitched back together.
    assert len(batches) >= 3
    assert any(e["continues"] for b in batches for e in b["episodes"])
    # Every sub-env recorded several episodes, and the seeds of the first resets are known.
    assert {ep.sub_env for ep in episodes} == set(range(NUM_ENVS))
    assert [ep.seed for ep in episodes[:NUM_ENVS]] == [10, 11, 12]
    assert sorted(ep.seed for ep in episodes if ep.seed is not None and 20 <= ep.seed < 30) \
        == [20, 21, 22]
    assert any(ep.options == options for ep in episodes)


def test_next_step_reset_steps_are_not_transitions(tmp_path):
    env = make("CartPole-v1", AutoresetMode.NEXT_STEP)
    truth, expected = record(tmp_path, env, 80)
    steps = [c for c in truth.calls if c[0] == "step"]
    reset_steps = 0
    pending = np.zeros(NUM_ENVS, bool)
    for c in truth.calls:
        if c[0] == "reset":
            pending[:] = False
            continue
        reset_steps += int(pending.sum())
        pending = c[4] | c[5]
    assert reset_steps >= 2
    with RecordingReader(tmp_path / "rec") as reader:
        total = sum(len(ep) for ep in reader)
        assert total == NUM_ENVS * len(steps) - reset_steps
        for ep in reader:
            # A reset step has reward 0 and no flags; as a transition it would have shown up
            # as a step whose observation is a fresh reset observation after the episode's end.
            assert not (ep.terminations[:-1] | ep.truncations[:-1]).any()
            if ep.end in ("terminated", "truncated"):
                assert ep.terminations[-1] or ep.truncations[-1]
    check(tmp_path, env, expected)


def test_same_step_final_observations_are_recorded(tmp_path):
    env = make("CartPole-v1", AutoresetMode.SAME_STEP)
    truth, expected = record(tmp_path, env, 80, target_batch_bytes=SMALL_BATCH)
    finals = []  # (sub_env, final obs, next reset obs) in order
    for c in truth.calls:
        if c[0] == "step" and "final_obs" in c[-1]:
            info, obs = c[-1], c[2]
            for i in np.flatnonzero(info["_final_obs"]):
                finals.append((int(i), info["final_obs"][i], obs[i]))
    assert len(finals) >= 2
    episodes = check(tmp_path, env, expected)
    for i, final, reset_obs in finals:
        ended = [k for k, ep in enumerate(episodes)
                 if ep.sub_env == i and ep.end in ("terminated", "truncated")
                 and np.array_equal(ep.observations[-1], final)]
        assert ended, f"final observation of sub-env {i} missing"
        following = [ep for ep in episodes[ended[0] + 1:] if ep.sub_env == i]
        assert_same(following[0].observations[0], reset_obs)
        assert not np.array_equal(final, reset_obs)


def test_partial_episodes_at_close_are_kept_and_marked(tmp_path):
    env = make("CartPole-v1", AutoresetMode.NEXT_STEP)
    rec = RecordingVectorWrapper(VectorTruth(env), tmp_path / "rec",
                                 target_batch_bytes=SMALL_BATCH)
    rec.reset(seed=0)
    for _ in range(5):  # CartPole episodes last more than 5 steps
        rec.step(np.ones(NUM_ENVS, dtype=np.int64))
    rec.close()
    truth = reconstruct(rec.env.calls, env)
    episodes = check(tmp_path, env, truth)
    assert [(ep.sub_env, len(ep), ep.end) for ep in episodes] == [
        (i, 5, "close") for i in range(NUM_ENVS)]
    assert all(ep.actions.tolist() == [1] * 5 for ep in episodes)


def test_flushed_open_episodes_read_as_not_ended(tmp_path):
    env = make("CartPole-v1", AutoresetMode.SAME_STEP)
    rec = RecordingVectorWrapper(env, tmp_path / "rec")
    rec.reset(seed=3)
    for _ in range(4):
        rec.step(np.zeros(NUM_ENVS, dtype=np.int64))
    rec.flush()  # as a killed process would leave it: committed, episodes still open
    with RecordingReader(tmp_path / "rec") as reader:
        assert [(ep.sub_env, len(ep), ep.end) for ep in reader] == [
            (i, 4, None) for i in range(NUM_ENVS)]
    rec.close()
    with RecordingReader(tmp_path / "rec") as reader:
        assert [(len(ep), ep.end) for ep in reader] == [(4, "close")] * NUM_ENVS


@pytest.mark.parametrize("vectorization", ["sync", "async"])
def test_disabled_reset_mask_starts_only_masked_sub_envs(tmp_path, vectorization):
    env = make("sample_envs/FixedLength-v0", AutoresetMode.DISABLED, vectorization,
               episode_length=4)
    truth = VectorTruth(env)
    rec = RecordingVectorWrapper(truth, tmp_path / "rec")
    rec.reset(seed=0)
    actions = np.zeros(NUM_ENVS, dtype=np.int64)
    for _ in range(2):
        rec.step(actions)
    rec.reset(seed=50, options={"reset_mask": np.array([False, True, False])})  # early reset
    for _ in range(2):
        _, _, terms, _, _ = rec.step(actions)
    assert terms.tolist() == [True, False, True]
    rec.reset(options={"reset_mask": terms})
    rec.step(actions)
    rec.close()
    expected = reconstruct(truth.calls, env)
    episodes = check(tmp_path, env, expected)
    assert [(ep.sub_env, len(ep), ep.end, ep.seed, ep.options) for ep in episodes] == [
        (0, 4, "terminated", 0, None), (1, 2, "reset", 1, None), (2, 4, "terminated", 2, None),
        (1, 3, "close", 51, {}), (0, 1, "close", None, {}), (2, 1, "close", None, {})]


def test_infos_are_split_per_sub_env(tmp_path):
    """Changing keys, nested dicts, masks, strings, None, arrays; vector statistics wrapper."""
    for mode in MODES:
        env = RecordEpisodeStatistics(make("sample_envs/ChangingInfo-v0", mode, episode_length=7))
        directory = tmp_path / mode.value
        truth = VectorTruth(env)
        rec = RecordingVectorWrapper(truth, directory / "rec", target_batch_bytes=SMALL_BATCH)
        drive(rec, truth, 25)
        expected = reconstruct(truth.calls, env)
        episodes = check(directory, env, expected)
        infos = [info for ep in episodes for info in ep.infos]
        assert any("episode" in info and "r" in info["episode"] for info in infos)
        assert any(isinstance(info.get("nested", {}).get("k"), list) for info in infos)
        assert any(info.get("name", "").startswith("step-") for info in infos)
        assert all("final_obs" not in info and "final_info" not in info for info in infos)


@pytest.mark.parametrize("env_id,kwargs", [("FrozenLake-v1", {}),
                                           ("sample_envs/Text-v0", {}),
                                           ("sample_envs/Image-v0", {"height": 6, "width": 5})])
def test_other_spaces(tmp_path, env_id, kwargs):
    """Discrete observations, Text observations (lists of str), images."""
    for mode in (AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP):
        env = make(env_id, mode, **kwargs)
        directory = tmp_path / mode.value
        truth, expected = record(directory, env, 30, target_batch_bytes=SMALL_BATCH)
        check(directory, env, expected)


def test_record_infos_false_and_info_filter(tmp_path):
    env = make("sample_envs/ChangingInfo-v0", AutoresetMode.SAME_STEP)
    truth, expected = record(tmp_path / "a", env, 20, record_infos=False)
    with RecordingReader(tmp_path / "a" / "rec") as reader:
        assert len(reader) == len(expected)
        assert all(info == {} for ep in reader for info in ep.infos)
        assert all(np.array_equal(ep.observations, np.stack(t.observations))
                   for ep, t in zip(reader, expected))
    env = make("sample_envs/ChangingInfo-v0", AutoresetMode.NEXT_STEP)
    truth, expected = record(tmp_path / "b", env, 20,
                             info_filter=lambda info: {k: v for k, v in info.items() if k == "x"})
    with RecordingReader(tmp_path / "b" / "rec") as reader:
        for ep, t in zip(reader, expected):
            assert_same(ep.infos, [{k: v for k, v in info.items() if k == "x"}
                                   for info in t.infos])


def test_batches_stay_bounded_and_adapt(tmp_path):
    env = make("CartPole-v1", AutoresetMode.NEXT_STEP, n=4)
    target = 20_000
    rec = RecordingVectorWrapper(env, tmp_path / "rec", target_batch_bytes=target)
    rec.reset(seed=0)
    for _ in range(1500):
        rec.step(rec.action_space.sample())
    capacity = rec._buffer.capacity
    rec.close()
    manifest, _ = manifest_and_batches(tmp_path / "rec")
    sizes = [b["bin_size"] + b["json_size"] for b in manifest["batches"]]
    assert len(sizes) >= 10
    assert capacity < 1500 // 10  # a batch holds far fewer vector steps than were taken
    # After the first batches taught the real bytes per step, batches land near the target.
    # (Batches filled before that lesson came back from the writer thread are left out: up to
    # MAX_PENDING_BATCHES + 2 of them.)
    assert all(0.5 * target <= s <= 1.6 * target for s in sizes[6:-1]), sizes
    check_batch_structure(tmp_path / "rec", 4, AutoresetMode.NEXT_STEP)


def test_errors(tmp_path):
    with pytest.raises(TypeError, match="VectorEnv"):
        RecordingVectorWrapper(gym.make("CartPole-v1"), tmp_path / "x")
    env = make("CartPole-v1", AutoresetMode.NEXT_STEP)
    rec = RecordingVectorWrapper(env, tmp_path / "rec")
    with pytest.raises(ResetNeeded):
        rec.step(np.zeros(NUM_ENVS, dtype=np.int64))
    rec.reset(seed=0)
    rec.close()
    rec.close()  # idempotent
    with pytest.raises(RecordingClosedError):
        rec.step(np.zeros(NUM_ENVS, dtype=np.int64))
    with pytest.raises(RecordingClosedError):
        rec.reset()
    with RecordingReader(tmp_path / "rec") as reader:
        assert [(len(ep), ep.end) for ep in reader] == [(0, "close")] * NUM_ENVS
    # A vector recording and a single-env recording share one directory and one reader.
    single = RecordingWrapper(gym.make("CartPole-v1"), tmp_path / "rec")
    single.reset(seed=1)
    single.step(0)
    single.close()
    with RecordingReader(tmp_path / "rec") as reader:
        assert sorted((ep.sub_env is None, len(ep)) for ep in reader) == \
            [(False, 0)] * NUM_ENVS + [(True, 1)]


@pytest.mark.filterwarnings("ignore:.*already returned terminated = True")
def test_disabled_step_without_reset_starts_a_no_reset_episode(tmp_path):
    """A sub-env stepped after its episode ended, without reset_mask: nothing is lost.

    Gymnasium's own vector envs refuse this (an assertion), other vector envs may not: the test
    clears SyncVectorEnv's bookkeeping to stand in for one.
    """
    env = make("CartPole-v1", AutoresetMode.DISABLED, n=2)
    truth = VectorTruth(env)
    rec = RecordingVectorWrapper(truth, tmp_path / "rec")
    rec.reset(seed=4)
    ones = np.ones(2, dtype=np.int64)
    while True:
        _, _, terms, truncs, _ = rec.step(ones)  # always push right: falls within ~10 steps
        if terms.any() or truncs.any():
            break
    ended = int(np.flatnonzero(terms | truncs)[0])
    for _ in range(3):
        env.unwrapped._autoreset_envs[:] = False
        rec.step(ones)  # CartPole warns and keeps stepping
    rec.close()
    calls = [c for c in truth.calls if c[0] == "step"]
    k = len(calls) - 3  # steps of the first episode of `ended`
    with RecordingReader(tmp_path / "rec") as reader:
        episodes = list(reader)
    first = [ep for ep in episodes if ep.sub_env == ended]
    # CartPole keeps saying terminated: each further step is a 1-step no_reset episode that
    # starts from the previous observation.
    assert [(len(ep), ep.end, ep.no_reset) for ep in first] == [
        (k, "terminated", False)] + [(1, "terminated", True)] * 3
    for j, ep in enumerate(first[1:]):
        assert_same(ep.observations, np.stack([calls[k - 1 + j][2][ended],
                                               calls[k + j][2][ended]]))
        assert_same(ep.actions, np.array([1]))
        assert ep.seed is None and ep.infos == [{}, {}]
    other = [ep for ep in episodes if ep.sub_env != ended]
    assert sum(len(ep) for ep in other) == len(calls)  # every step of the other sub-env too


def test_readme_vector_example_runs(tmp_path, monkeypatch):
    from docpages import python_block

    block = python_block("RecordingVectorWrapper(gym.make_vec(")
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    exec(compile(block, "docs/vector-envs.md", "exec"), scope)
    ep = scope["ep"]
    assert (ep.sub_env, ep.seed) == (0, 0)
    assert ep.observations.shape == (len(ep) + 1, 4)
    with RecordingReader(tmp_path / "recordings" / "cartpole-vec") as reader:
        assert sorted({e.sub_env for e in reader}) == list(range(8))
        assert sum(len(e) for e in reader) <= 8 * 1000
