"""gym_recorder.record.buffer, record.vector_buffer and record.vector_columns on their own: batches cut at capacity,
episode parts, resizing, and values outside the space, on real envs (no writer, no files)."""

import warnings

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401
from gym_recorder.errors import OutsideSpaceWarning
from gym_recorder.record.buffer import StepBuffer, steps_for_target
from gym_recorder.format.spaces import Layout
from gym_recorder.record.vector_buffer import NEXT_STEP, VectorStepBuffer
from gym_recorder.record.wrapper import env_header


def layouts(env, obs_space=None, act_space=None):
    header = env_header(env, obs_space or env.observation_space, act_space or env.action_space)
    return Layout(header["observation_space"]), Layout(header["action_space"])


def play(env, buf, steps, seed=0):
    """Steps ``env`` with actions ``t % 2`` into ``buf``, taking a batch whenever it is full;
    returns the batches and, per episode, its observations and actions."""
    obs, info = env.reset(seed=seed)
    buf.start_episode(obs, info, seed, None)
    truth = [([obs.copy()], [])]
    batches = []
    for t in range(steps):
        action = t % 2
        obs, reward, terminated, truncated, info = env.step(action)
        truth[-1][0].append(obs.copy())
        truth[-1][1].append(action)
        if buf.add_step(action, obs, reward, terminated, truncated, info):
            batches.append(buf.take())
        if terminated or truncated:
            obs, info = env.reset()
            buf.start_episode(obs, info, None, None)
            truth.append(([obs.copy()], []))
    batches.append(buf.take())
    return [b for b in batches if b is not None], truth


def rejoin(batches):
    """Joins the episode parts of taken batches: per episode, (observations, actions, ends)."""
    episodes: dict[int, list] = {}
    for batch in batches:
        (obs,), (act,) = batch.observations, batch.actions
        for seg in batch.segments:
            ep = episodes.setdefault(seg.episode, [[], [], []])
            assert seg.part == len(ep[2]), "parts come in order, one per batch"
            ep[0].append(obs[seg.obs0:seg.obs1])
            ep[1].append(act[seg.step0:seg.step1])
            ep[2].append(seg.end)
    return [(np.concatenate(o), np.concatenate(a), ends) for _, (o, a, ends) in
            sorted(episodes.items())]


def test_batches_are_cut_at_capacity_and_episodes_join_across_parts():
    env = gym.make("CartPole-v1")
    buf = StepBuffer(*layouts(env), target_batch_bytes=4_000)
    capacity = buf.capacity
    assert capacity == steps_for_target(4_000, 64 + 8 + 2 + 16 + 8)  # the first estimate
    batches, truth = play(env, buf, 300)
    assert all(b.steps == capacity for b in batches[:-1]) and len(batches) > 3
    for batch in batches:
        # Each entry's rows follow the previous entry's, in every column.
        segs = batch.segments
        assert segs[0].obs0 == segs[0].step0 == segs[0].info0 == 0
        for a, b in zip(segs, segs[1:]):
            assert (b.obs0, b.step0, b.info0) == (a.obs1, a.step1, a.info1)
        assert segs[-1].step1 == batch.steps == len(batch.rewards)
        assert segs[-1].obs1 == len(batch.observations[0])
        assert batch.new_episodes == sum(s.part == 0 for s in segs)
        for s in segs:
            # A part 0 holds the reset observation; a continuing part only the steps' ones.
            assert s.obs1 - s.obs0 == s.step1 - s.step0 + (s.part == 0)
            assert (s.seed is None and s.options is None) or s.part == 0
    joined = rejoin(batches)
    assert len(joined) == len(truth)
    for (obs, act, ends), (t_obs, t_act) in zip(joined, truth):
        np.testing.assert_array_equal(obs, np.stack(t_obs))
        assert obs.dtype == np.float32
        np.testing.assert_array_equal(act, np.array(t_act, np.int64))
        assert all(e is None for e in ends[:-1])
    assert joined[0][2][-1] in ("terminated", "truncated")
    assert joined[-1][2][-1] is None  # still open when the last batch was taken
    assert any(len(ends) > 1 for _, _, ends in joined)  # some episode spans batches


def test_columns_are_reused_and_resized_only_when_the_estimate_moves():
    env = gym.make("CartPole-v1")
    buf = StepBuffer(*layouts(env), target_batch_bytes=4_000)
    batches, _ = play(env, buf, 3 * buf.capacity - 1)
    cols = batches[0].observations[0].base
    batches[0].release()
    batches, _ = play(env, buf, 2 * buf.capacity)
    # The batch after the next one fills the released columns again (no new allocation).
    assert [b.observations[0].base is cols for b in batches[:2]] == [False, True]
    before = buf.capacity
    buf.observe_batch_bytes(4_400, before)  # 10% more bytes a step than the columns assume
    batches, _ = play(env, buf, before + 1)
    assert batches[0].steps == before and buf.capacity == before  # kept
    buf.observe_batch_bytes(8_000, before)  # twice the bytes a step: half the steps
    assert buf.capacity == before  # (the batch being filled keeps its columns)
    batches, _ = play(env, buf, before + 1)
    assert batches[0].steps == before and buf.capacity == before // 2
    batches, _ = play(env, buf, before + 1)
    assert [b.steps for b in batches] == [before // 2, before // 2, 1]


def test_values_outside_the_space_are_kept_exactly():
    env = gym.make("sample_envs/Image-v0", height=4, width=4, disable_env_checker=True)
    buf = StepBuffer(*layouts(env), target_batch_bytes=1 << 20)
    obs, _ = env.reset(seed=0)
    buf.start_episode(obs, {}, 0, None)
    wide = np.full((4, 4, 3), 300, np.uint16)  # does not fit the space's uint8
    with pytest.warns(OutsideSpaceWarning, match="dtype uint16 does not fit"):
        buf.add_step(0, wide, 0.0, False, False, {})
    odd = np.zeros((2, 2, 3), np.uint8)  # not the space's shape
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per leaf
        buf.add_step(1, odd, 0.0, False, False, {})
        buf.add_step(2, obs, 1.0, False, True, {})
    batch = buf.take()
    col = batch.observations[0]
    assert type(col) is list and len(col) == 4  # stored as one value a row from then on
    assert col[0].dtype == np.uint16 and (col[0] == obs).all()  # the widened rows kept
    assert col[1].dtype == np.uint16 and (col[1] == 300).all()
    assert col[2].shape == (2, 2, 3) and col[2].dtype == np.uint8
    np.testing.assert_array_equal(col[3], obs)
    assert batch.segments[0].end == "truncated"


def test_vector_buffer_shares_the_sizing_and_cuts_at_capacity():
    n = 3
    envs = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="sync")
    single = gym.make("CartPole-v1")
    obs_l, act_l = layouts(envs, envs.single_observation_space, envs.single_action_space)
    vec = VectorStepBuffer(obs_l, act_l, n, NEXT_STEP, target_batch_bytes=6_000)
    one = StepBuffer(*layouts(single), target_batch_bytes=6_000)
    assert vec.capacity == one.capacity // n  # the same estimate, rows of n steps
    obs, _ = envs.reset(seed=[0, 1, 2])
    vec.reset(obs, {}, None, [0, 1, 2], None)
    frames = [obs.copy()]
    batches = []
    for t in range(2 * vec.capacity):
        actions = np.array([(t + i) % 2 for i in range(n)])
        obs, rew, term, trunc, _ = envs.step(actions)
        frames.append(obs.copy())
        vec.step(actions, obs, rew, term, trunc)
        if vec.full:
            batches.append(vec.take())
    assert len(batches) >= 1
    first = batches[0]
    # The reset takes a row too: a batch holds capacity rows, one of them the reset.
    assert first.steps == (vec.capacity - 1) * n
    for i in range(n):
        seg = next(s for s in first.segments if s.sub_env == i)
        assert seg.part == 0 and seg.seed == i
        got = first.observations[0][seg.obs0:seg.obs1]
        np.testing.assert_array_equal(got, np.stack(frames)[:len(got), i])
    # The shared sizing: four times the bytes estimated per step, a quarter of the rows.
    rows = vec.capacity
    vec.observe_batch_bytes(24_000, rows * n)
    vec.take()
    assert vec.capacity == max(1, steps_for_target(6_000, 24_000 / (rows * n)) // n) < rows


def test_fast_paths_take_only_exact_values():
    """The per-step copy through a memoryview (rows of one dimension, integer actions) takes a
    value of exactly the column's dtype and shape; anything else goes the exact way."""
    env = gym.make("CartPole-v1")
    buf = StepBuffer(*layouts(env), target_batch_bytes=1 << 20)
    obs, _ = env.reset(seed=0)
    buf.start_episode(obs, {}, 0, None)
    steps = [(np.int64(1), obs + 1), (True, (obs + 2).astype(np.float32)),
             (np.int32(0), np.arange(8, dtype=np.float32)[::2]), (np.array(1), obs + 4)]
    for action, o in steps:
        assert buf.record_step(action, (o, 1.0, False, False, {})) in (True, False)
    with pytest.warns(OutsideSpaceWarning, match="dtype float64 does not fit"):
        buf.record_step(0, (obs.astype(np.float64) + 0.1, 1.0, False, False, {}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (warned once per leaf: the observation's was)
        buf.record_step(1, (np.zeros((2, 2), np.float32), 1.0, False, False, {}))
    with pytest.warns(OutsideSpaceWarning, match="dtype float64 does not fit"):
        buf.record_step(1.5, (obs, 1.0, False, True, {}))
    batch = buf.take()
    (col,), (act,) = batch.observations, batch.actions
    assert type(col) is list and len(col) == 8  # turned into values at the odd shape
    for row, (_, o) in zip(col[1:], steps):
        np.testing.assert_array_equal(row, o)
    assert col[1].dtype == np.float64  # the rows written before were widened exactly
    np.testing.assert_array_equal(col[5], obs.astype(np.float64) + 0.1)
    assert col[6].shape == (2, 2)
    assert act.dtype == np.float64 and act.tolist() == [1, 1, 0, 1, 0, 1, 1.5]
