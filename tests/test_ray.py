"""gym_recorder.integrations.ray on a real local Ray cluster (2 CPUs, shared by the session's tests)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from needs import need_module

pytestmark = pytest.mark.usefixtures("ray_cluster")


def _ray_mod():
    need_module("ray.data", 'pip install ".[ray]"')
    from gym_recorder.integrations import ray as gr_ray

    return gr_ray


def record(env, directory, episodes, seed, policy=None, target=None):
    kw = {"target_batch_bytes": target} if target else {}
    rec = RecordingWrapper(env, directory, **kw)
    rec.action_space.seed(seed)
    obs, _ = rec.reset(seed=seed)
    done = 0
    while done < episodes:
        action = policy(obs) if policy else rec.action_space.sample()
        obs, _, term, trunc, _ = rec.step(action)
        if term or trunc:
            done += 1
            if done < episodes:
                obs, _ = rec.reset()
    rec.close()


def flat(tree, prefix):
    if isinstance(tree, dict):
        return {k2: v2 for k, v in tree.items() for k2, v2 in flat(v, f"{prefix}.{k}").items()}
    if isinstance(tree, tuple):
        return {k2: v2 for i, v in enumerate(tree) for k2, v2 in flat(v, f"{prefix}.{i}").items()}
    return {prefix: tree}


def expected_steps(reader, count=None):
    cols: dict[str, list] = {}
    for ep in reader:
        n = len(ep)
        row = {k: v[:-1] for k, v in flat(ep.observations, "obs").items()}
        row.update({"next_" + k: v[1:] for k, v in flat(ep.observations, "obs").items()})
        row.update(flat(ep.actions, "action"))
        row.update(reward=ep.rewards, terminated=ep.terminations, truncated=ep.truncations,
                   episode=np.full(n, ep.index, dtype=np.int64),
                   step=np.arange(n, dtype=np.int64))
        for k, v in row.items():
            cols.setdefault(k, []).append(v)
    return {k: np.concatenate(v) for k, v in cols.items()}


def dataset_columns(ds):
    cols: dict[str, list] = {}
    for batch in ds.iter_batches(batch_format="numpy", batch_size=None):
        for k, v in batch.items():
            cols.setdefault(k, []).append(v)
    return {k: np.concatenate(v) for k, v in cols.items()}


def assert_same_array(got, want, where):
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(want).tobytes(), where


def assert_steps_equal(ds, reader):
    want = expected_steps(reader)
    got = dataset_columns(ds)
    assert list(got) == list(want)
    for k in want:
        assert_same_array(got[k], want[k], k)
    return len(want["reward"])


def assert_episodes_equal(ds, reader):
    rows = ds.take_all()
    assert len(rows) == len(reader)
    for row, ep in zip(rows, reader):
        assert row["episode"] == ep.index
        for k, v in {**flat(ep.observations, "obs"), **flat(ep.actions, "action")}.items():
            assert_same_array(np.asarray(row[k]), v, f"episode {ep.index} {k}")
        assert_same_array(np.asarray(row["reward"]), ep.rewards, "reward")
        assert_same_array(np.asarray(row["terminated"]), ep.terminations, "terminated")
        assert_same_array(np.asarray(row["truncated"]), ep.truncations, "truncated")
        assert row["length"] == len(ep) and row["return"] == ep.total_reward
        assert row["end"] == ep.end and row["writer"] == ep.writer
        assert row["env_id"] == ep.env_id
        assert (row["seed"] is None and ep.seed is None) or row["seed"] == ep.seed


ENVS = {
    "cartpole": (lambda: gym.make("CartPole-v1"), 6, None),
    # Episodes longer than a batch: parts continue across batches (and read tasks).
    "image": (lambda: gym.make("sample_envs/Image-v0", height=16, width=16, episode_length=30),
              3, 6_000),
    "dict": (lambda: gym.make("sample_envs/NestedDict-v0", episode_length=25), 4, 3_000),
}


def record_two_writers(name, d):
    """Records ENVS[name] with two writers into d; returns the batch target."""
    make, episodes, target = ENVS[name]
    record(make(), d, episodes, seed=3, target=target)
    record(make(), d, 2, seed=4, target=target)
    return target


@pytest.mark.parametrize("name", list(ENVS))
def test_read_recording_equals_the_reader(name, tmp_path):
    gr_ray = _ray_mod()
    d = tmp_path / name
    target = record_two_writers(name, d)
    with RecordingReader(d) as reader:
        ds = gr_ray.read_recording(d)
        steps = assert_steps_equal(ds, reader)
        assert steps == sum(len(ep) for ep in reader)
        assert_episodes_equal(gr_ray.read_recording(d, granularity="episode"), reader)
        if target:  # several batches: each its own read task, or a few tasks of them
            source = gr_ray.RecordingDatasource(str(d), batches_per_task=1)
            assert source.tasks == source.batches == len(reader.batches()) > len(reader)
            grouped = gr_ray.RecordingDatasource(str(d))  # < TASK_BYTES in all: one task
            assert (grouped.tasks, grouped.batches) == (1, len(reader.batches()))


@pytest.mark.parametrize("name", ["image", "dict"])
@pytest.mark.parametrize("per_task", [2, 3, "bytes"])
def test_tasks_of_several_batches_give_the_reader_rows(name, per_task, tmp_path, monkeypatch):
    """Read tasks of consecutive batches (a fixed number, or up to TASK_BYTES of rows) give
    the same rows in the same order, episodes continuing across batches and tasks included."""
    gr_ray = _ray_mod()
    d = tmp_path / name
    target = record_two_writers(name, d)
    with RecordingReader(d) as reader:
        batches = len(reader.batches())
        if per_task == "bytes":  # about two batches' rows a task
            monkeypatch.setattr(gr_ray, "TASK_BYTES", 2 * 2 * target + 1)
            kwargs: dict = {}
        else:
            kwargs = {"batches_per_task": per_task}
        source = gr_ray.RecordingDatasource(str(d), **kwargs)
        assert source.batches == batches > 4
        assert sum(source.task_batches) == batches and len(source.task_batches) == source.tasks
        if per_task != "bytes":
            assert source.tasks == -(-batches // per_task)
        else:
            assert 2 <= source.tasks < batches
        assert_steps_equal(gr_ray.read_recording(d, **kwargs), reader)
        assert_episodes_equal(gr_ray.read_recording(d, granularity="episode", **kwargs), reader)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_batches_per_task_must_be_a_positive_int(bad, tmp_path):
    gr_ray = _ray_mod()
    d = tmp_path / "c"
    record(gym.make("CartPole-v1"), d, 2, seed=0, target=None)
    with pytest.raises(ValueError, match="batches_per_task"):
        gr_ray.read_recording(d, batches_per_task=bad)


@pytest.mark.parametrize("name", ["image", "dict"])
@pytest.mark.parametrize("order", ["forward", "backward"])
def test_read_tasks_in_any_order_give_the_reader_rows(name, order, tmp_path):
    """A read task that continues an episode needs the last observation of its part in the
    batch before: remembered when the same process read that batch just before (forward),
    decoded again otherwise (backward: every task runs before the one of its batch before)."""
    gr_ray = _ray_mod()
    from ray.data.block import BlockAccessor

    make, episodes, target = ENVS[name]
    d = tmp_path / name
    record(make(), d, episodes, seed=5, target=target)
    tasks = gr_ray.RecordingDatasource(str(d), batches_per_task=1).get_read_tasks(1)
    order_of = list(range(len(tasks)))
    if order == "backward":
        order_of.reverse()
    blocks = {}
    for i in order_of:
        (block,) = list(tasks[i]())
        blocks[i] = BlockAccessor.for_block(block).to_numpy()
    with RecordingReader(d) as reader:
        assert len(tasks) == len(reader.batches())
        assert any(info.episodes and reader.read_batch(info)[0].part > 0
                   for info in reader.batches())  # some parts do continue
        want = expected_steps(reader)
    got = {k: np.concatenate([blocks[i][k] for i in range(len(tasks))]) for k in want}
    for k in want:
        assert_same_array(got[k], want[k], k)


def test_a_dataset_is_a_snapshot_of_the_committed_batches(tmp_path):
    gr_ray = _ray_mod()
    d = tmp_path / "live"
    rec = RecordingWrapper(gym.make("CartPole-v1"), d)
    rec.action_space.seed(0)
    rec.reset(seed=0)
    for _ in range(30):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        if term or trunc:
            rec.reset()
    rec.flush()
    old_steps = gr_ray.read_recording(d)
    old_eps = gr_ray.read_recording(d, granularity="episode")
    with RecordingReader(d) as before:
        want_old = expected_steps(before)
        old_lengths = [len(ep) for ep in before]
    for _ in range(25):
        _, _, term, trunc, _ = rec.step(rec.action_space.sample())
        if term or trunc:
            rec.reset()
    rec.flush()
    new_steps = gr_ray.read_recording(d)
    got_old = dataset_columns(old_steps)  # run after the second batch was committed
    assert len(got_old["reward"]) == 30
    for k in want_old:
        assert_same_array(got_old[k], want_old[k], k)
    assert [r["length"] for r in old_eps.take_all()] == old_lengths
    with RecordingReader(d) as after:
        assert sum(len(ep) for ep in after) == 55
        assert assert_steps_equal(new_steps, after) == 55
    rec.close()


def test_to_rllib_columns(tmp_path):
    gr_ray = _ray_mod()
    d = tmp_path / "cp"
    record(gym.make("CartPole-v1"), d, 2, seed=1)
    out = gr_ray.to_rllib(gr_ray.read_recording(d))
    assert out.columns() == ["obs", "new_obs", "actions", "rewards", "terminateds",
                             "truncateds", "eps_id", "t"]
    got = dataset_columns(out)
    with RecordingReader(d) as reader:
        want = expected_steps(reader)
    for ours, theirs in gr_ray.RLLIB_COLUMNS.items():
        assert_same_array(got[theirs], want[ours], theirs)
    with pytest.raises(ValueError, match="step dataset"):
        gr_ray.to_rllib(gr_ray.read_recording(d, granularity="episode"))


def test_record_parallel_three_actors_into_one_directory(tmp_path):
    gr_ray = _ray_mod()
    d = tmp_path / "par"
    summary = gr_ray.record_parallel("CartPole-v1", d, num_workers=3, episodes_per_worker=4,
                                     seed=7)
    assert summary.failures == {}
    assert summary.seeds == gr_ray.worker_seeds(7, 3) and len(set(summary.seeds)) == 3
    assert summary.episodes == 12 and len(set(summary.writers)) == 3
    with RecordingReader(d) as reader:
        assert len(reader) == 12 and summary.steps == sum(len(ep) for ep in reader)
        assert sorted(w["prefix"] for w in reader.writers) == sorted(summary.writers)
        for k, (prefix, seed) in enumerate(zip(summary.writers, summary.seeds)):
            eps = [ep for ep in reader if ep.writer == prefix]
            assert [ep.seed for ep in eps] == [seed, None, None, None]
            # Ground truth: the same env, seeded and sampled as worker k was, in this process.
            env = gym.make("CartPole-v1")
            env.action_space.seed(seed)
            obs, _ = env.reset(seed=seed)
            for ep in eps:
                if ep is not eps[0]:
                    obs, _ = env.reset()
                np.testing.assert_array_equal(ep.observations[0], obs)
                for t in range(len(ep)):
                    action = env.action_space.sample()
                    assert ep.actions[t] == action
                    obs, reward, term, trunc, _ = env.step(action)
                    np.testing.assert_array_equal(ep.observations[t + 1], obs)
                assert term or trunc


def test_record_parallel_with_a_creator_and_policy(tmp_path):
    gr_ray = _ray_mod()
    from sample_envs.envs import ImageEnv

    d = tmp_path / "img"
    summary = gr_ray.record_parallel(lambda: ImageEnv(height=8, width=8, episode_length=5), d,
                                     num_workers=2, episodes_per_worker=2, seed=11,
                                     policy=lambda obs: int(obs[0, 0, 0]) % 4)
    assert summary.failures == {} and summary.episodes == 4 and summary.steps == 20
    with RecordingReader(d) as reader:
        for ep in reader:
            assert ep.observations.shape == (6, 8, 8, 3)
            assert list(ep.actions) == [int(o[0, 0, 0]) % 4 for o in ep.observations[:-1]]
    with pytest.raises(ValueError, match="num_workers"):
        gr_ray.record_parallel("CartPole-v1", d, num_workers=0, episodes_per_worker=1)


def test_read_recording_from_s3_equals_the_local_reader(s3, tmp_path):
    gr_ray = _ray_mod()
    from gym_recorder.integrations.cloud import push

    d = tmp_path / "img"
    make, episodes, target = ENVS["image"]
    record(make(), d, episodes, seed=5, target=target)
    push(d, s3.url("img"))
    # Ray's workers were started before this test set the AWS environment: pass it all.
    opts = {"endpoint_url": s3.endpoint, "key": "testing", "secret": "testing"}
    with RecordingReader(d) as reader:
        assert_steps_equal(gr_ray.read_recording(s3.url("img"), storage_options=opts), reader)
        assert_episodes_equal(gr_ray.read_recording(s3.url("img"), granularity="episode",
                                                    storage_options=opts), reader)


class DiesAtStep(gym.Wrapper):
    """CartPole that kills its process at step ``at`` of the episode reset with ``seed``."""

    def __init__(self, env, seed, at):
        super().__init__(env)
        self.doomed, self.at, self.t, self.armed = seed, at, 0, False

    def reset(self, *, seed=None, options=None):
        self.armed = seed == self.doomed
        self.t = 0
        return self.env.reset(seed=seed, options=options)

    def step(self, action):
        import os
        import time

        self.t += 1
        if self.armed and self.t == self.at:
            time.sleep(1.0)  # the recorder's background thread commits what it flushed
            os._exit(1)
        time.sleep(0.02)
        return self.env.step(action)


def test_a_dying_worker_loses_at_most_its_flush_interval(tmp_path):
    gr_ray = _ray_mod()
    d = tmp_path / "dies"
    doomed = gr_ray.worker_seeds(5, 3)[1]
    summary = gr_ray.record_parallel(lambda: DiesAtStep(gym.make("CartPole-v1"), doomed, 6), d,
                                     num_workers=3, episodes_per_worker=2, seed=5,
                                     recorder_kwargs={"flush_interval": 0.01})
    assert list(summary.failures) == [1] and "ActorDiedError" in summary.failures[1]
    assert summary.episodes == 4
    with RecordingReader(d) as reader:
        assert sorted(w["prefix"] for w in reader.writers) == sorted(summary.writers)
        done = [ep for ep in reader if ep.writer != summary.writers[1]]
        assert len(done) == 4 and all(ep.end in ("terminated", "truncated") for ep in done)
        lost = [ep for ep in reader if ep.writer == summary.writers[1]]  # the dead worker's
        assert len(lost) == 1 and lost[0].seed == doomed and lost[0].end is None
        # Steps 1..5 were taken (CartPole cannot end sooner), each committed within 0.01 s: at
        # most the last one is lost.
        assert 4 <= len(lost[0]) <= 5
        env = gym.make("CartPole-v1")
        env.action_space.seed(doomed)
        obs, _ = env.reset(seed=doomed)
        np.testing.assert_array_equal(lost[0].observations[0], obs)
        for t in range(len(lost[0])):
            obs, *_ = env.step(env.action_space.sample())
            np.testing.assert_array_equal(lost[0].observations[t + 1], obs)


@pytest.mark.parametrize("name", ["cartpole", "image"])
def test_a_recording_replaced_under_the_same_names_is_read_anew(tmp_path, name):
    """Workers keep a reader per recording: a recording deleted and recorded again with the
    same file prefix (so the same batch names) must not be served from the old reader, the
    old files or the remembered rows of episodes that continue across batches."""
    import shutil

    from gym_recorder.errors import FormatError

    gr_ray = _ray_mod()
    d = tmp_path / "again"

    def make(seed, episodes):
        if name == "cartpole":  # one batch (the worker's reader keeps it decoded)
            env = RecordingWrapper(gym.make("CartPole-v1"), d, file_prefix="run")
        else:  # many batches, episodes continuing across them
            env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                            episode_length=30), d, file_prefix="run",
                                   target_batch_bytes=6_000)
        env.action_space.seed(seed)
        env.reset(seed=seed)
        done = 0
        while done < episodes:
            if any(env.step(env.action_space.sample())[2:4]):
                done += 1
                env.reset()
        env.close()

    make(1, 3)
    with RecordingReader(d) as reader:
        for _ in range(3):  # (so that every worker process holds a reader of it)
            assert_steps_equal(gr_ray.read_recording(d, batches_per_task=2), reader)
            assert_episodes_equal(gr_ray.read_recording(d, granularity="episode"), reader)
    stale = gr_ray.read_recording(d)  # made now, executed after the replacement below
    shutil.rmtree(d)
    make(2, 2)
    with RecordingReader(d) as reader:
        for _ in range(3):
            steps = assert_steps_equal(gr_ray.read_recording(d, batches_per_task=2), reader)
            assert steps == sum(len(ep) for ep in reader) and len(reader) == 3  # (+ a 0-step one)
            assert_episodes_equal(gr_ray.read_recording(d, granularity="episode"), reader)
    with pytest.raises(Exception) as caught:
        stale.materialize()
    assert isinstance(caught.value, FormatError) or isinstance(
        getattr(caught.value, "cause", None), FormatError), caught.value
    assert "is not the one this dataset was made with" in str(caught.value)


class _Explodes(gym.Wrapper):
    def step(self, action):
        raise RuntimeError("creator exploded")


def test_record_parallel_failures_say_why_in_one_line(tmp_path):
    """A worker's exception comes back as its type and message (not Ray's traceback cut before
    them); an id that cannot be made and a URL as directory fail before any actor starts."""
    gr_ray = _ray_mod()
    from gym_recorder.replay.run import ReplayError

    summary = gr_ray.record_parallel(lambda: _Explodes(gym.make("CartPole-v1")), tmp_path / "x",
                                     num_workers=2, episodes_per_worker=1, seed=0)
    assert summary.failures == {0: "RuntimeError: creator exploded",
                                1: "RuntimeError: creator exploded"}
    assert len(summary.writers) == 2 and len(set(summary.writers)) == 2
    summary = gr_ray.record_parallel("CartPole-v1", tmp_path / "p", num_workers=1,
                                     episodes_per_worker=1, seed=0, policy=lambda obs: 1 // 0)
    assert summary.failures == {0: "ZeroDivisionError: integer division or modulo by zero"}
    with pytest.raises(ReplayError, match="NoSuchEnv-v9"):
        gr_ray.record_parallel("NoSuchEnv-v9", tmp_path / "n", num_workers=1,
                               episodes_per_worker=1)
    with pytest.raises(ValueError, match="local directory"):
        gr_ray.record_parallel("CartPole-v1", "s3://bucket/run", num_workers=1,
                               episodes_per_worker=1)
    with pytest.raises(ValueError, match="leave out file_prefix"):
        gr_ray.record_parallel("CartPole-v1", tmp_path / "f", num_workers=1,
                               episodes_per_worker=1, recorder_kwargs={"file_prefix": "a"})
    assert not (tmp_path / "n").exists() and not (tmp_path / "f").exists()


class _Float64Reset(gym.Wrapper):
    """CartPole whose reset gives float64 observations (its steps float32): batches that hold a
    reset store the leaf widened, batches in the middle of an episode do not."""

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return obs.astype(np.float64), info


@pytest.mark.parametrize("per_task", [None, 1])
def test_a_leaf_widened_in_some_batches_is_one_dtype_in_every_block(tmp_path, per_task):
    """Batches holding a reset store the leaf as float64, the others as float32: every block
    gives float64 (Ray Data cannot concatenate blocks of two tensor dtypes), the reader's rows,
    at both granularities."""
    import warnings

    gr_ray = _ray_mod()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        record(_Float64Reset(gym.make("CartPole-v1")), tmp_path, 12, seed=3, target=1500)
    with RecordingReader(tmp_path) as reader:
        forms = {p.observations.dtype for info in reader.batches() for p in reader.read_batch(info)}
        assert forms == {np.dtype(np.float32), np.dtype(np.float64)}  # (the case under test)
        ds = gr_ray.read_recording(tmp_path, batches_per_task=per_task)
        assert_steps_equal(ds, reader)
        blocks = list(ds.iter_batches(batch_format="numpy", batch_size=None))
        assert {b[k].dtype for b in blocks for k in ("obs", "next_obs")} == {np.dtype(np.float64)}
        rows = list(ds.iter_batches(batch_format="numpy", batch_size=50))  # (across blocks)
        assert sum(len(b["obs"]) for b in rows) == sum(len(b["obs"]) for b in blocks)
        ds = gr_ray.read_recording(tmp_path, granularity="episode", batches_per_task=per_task)
        assert_episodes_equal(ds, reader)


def test_a_leaf_that_joins_only_by_rounding_is_refused_by_name(tmp_path):
    """int64 beyond 2**53 in some batches, float64 in others: no one tensor dtype holds the
    column; the read task raises UnsupportedValueError rather than round."""
    from test_env_outside_space import _big_then_float

    gr_ray = _ray_mod()
    _big_then_float(tmp_path / "rec")
    with pytest.raises(Exception, match=r"UnsupportedValueError.*column obs holds int64 values "
                                        r"that float64, its dtype in other batches, would round"):
        gr_ray.read_recording(tmp_path / "rec").take_all()
