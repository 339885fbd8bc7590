"""RecordingReader.batches() and read_batch(): a recording batch by batch, equal to its episodes."""

import json
import pickle

import gymnasium as gym
import numpy as np
import pytest

import sample_envs  # noqa: F401
from conftest import assert_same, run_random
from gym_recorder import FormatError, RecordingReader, RecordingVectorWrapper, RecordingWrapper
from gym_recorder.read.reader import BatchInfo, EpisodePart
from gym_recorder.read.storage import LocalStorage
from test_legacy import make_legacy


def _concat(rows: list):
    """Concatenates part values the way an Episode stacks them (arrays, dicts, tuples, lists)."""
    first = rows[0]
    if isinstance(first, np.ndarray):
        return np.concatenate(rows)
    if isinstance(first, dict):
        return {k: _concat([r[k] for r in rows]) for k in first}
    if isinstance(first, tuple):
        return tuple(_concat([r[i] for r in rows]) for i in range(len(first)))
    return [x for r in rows for x in r]


def check_batches(reader: RecordingReader) -> dict[int, list[EpisodePart]]:
    """Reads every batch; checks that the parts of each episode concatenate to exactly it."""
    infos = reader.batches()
    parts: dict[int, list[EpisodePart]] = {}
    for info in infos:
        got = reader.read_batch(info)
        # What the manifest-only listing says is what decoding the batch finds.
        assert info.episodes == tuple(sorted({p.episode for p in got})), info
        for p in got:
            parts.setdefault(p.episode, []).append(p)
    assert sorted(parts) == list(range(len(reader)))
    for i in range(len(reader)):
        ep, ps = reader[i], parts[i]
        where = f"episode {i}"
        assert [p.part for p in ps] == list(range(len(ps))), where
        assert [p.is_last for p in ps] == [False] * (len(ps) - 1) + [True], where
        step = 0
        for p in ps:
            assert p.first_step == step, where
            step += len(p.rewards)
            assert len(p.terminations) == len(p.truncations) == len(p.rewards), where
        assert step == ep.length, where
        for name in ("observations", "actions", "rewards", "terminations", "truncations",
                     "infos"):
            assert_same(_concat([getattr(p, name) for p in ps]), getattr(ep, name),
                        f"{where} {name}")
    return parts


def test_cartpole_many_episodes_and_parts_per_batch(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=3_000)
    run_random(env, 1500)
    env.close()
    with RecordingReader(tmp_path) as reader:
        infos = reader.batches()
        assert len(infos) > 5
        assert any(len(i.episodes) > 2 for i in infos)  # several episodes a batch
        parts = check_batches(reader)
    assert any(len(ps) > 1 for ps in parts.values())  # and episodes over several batches
    assert [i.number for i in infos] == list(range(len(infos)))
    for info in infos:
        assert (tmp_path / info.json_name).is_file() and (tmp_path / info.bin_name).is_file()


def test_image_episodes_over_many_batches(tmp_path):
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=16, width=16,
                                    episode_length=300), tmp_path, target_batch_bytes=20_000)
    run_random(env, 700)
    env.close()
    with RecordingReader(tmp_path, verify=True) as reader:
        parts = check_batches(reader)
        assert max(len(ps) for ps in parts.values()) > 5
        obs = parts[0][1].observations
        assert obs.dtype == np.uint8 and obs.shape[1:] == (16, 16, 3)
        # Part 0 holds the reset observation as well; later parts one row per step.
        assert len(parts[0][0].observations) == len(parts[0][0].rewards) + 1
        assert len(parts[0][1].observations) == len(parts[0][1].rewards)


def test_dict_spaces(tmp_path):
    env = RecordingWrapper(gym.make("sample_envs/NestedDict-v0"), tmp_path,
                           target_batch_bytes=4_000)
    run_random(env, 300)
    env.close()
    with RecordingReader(tmp_path) as reader:
        parts = check_batches(reader)
    assert isinstance(parts[0][0].observations, dict)
    assert isinstance(parts[0][0].actions, dict)


def test_text_and_changing_infos(tmp_path):
    for env_id in ("sample_envs/Text-v0", "sample_envs/ChangingInfo-v0"):
        d = tmp_path / env_id.split("/")[1]
        env = RecordingWrapper(gym.make(env_id), d, target_batch_bytes=2_000)
        run_random(env, 200)
        env.close()
        with RecordingReader(d) as reader:
            check_batches(reader)


@pytest.mark.parametrize("num_envs", [1, 3])
def test_vector_recordings(tmp_path, num_envs):
    env = gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="sync")
    rec = RecordingVectorWrapper(env, tmp_path, target_batch_bytes=2_000)
    rec.action_space.seed(3)
    rec.reset(seed=3)
    for _ in range(400):
        rec.step(rec.action_space.sample())
    rec.close()
    with RecordingReader(tmp_path) as reader:
        parts = check_batches(reader)
        assert len(reader.batches()) > 5
    assert any(len(ps) > 2 for ps in parts.values())


def test_several_writers_in_one_directory(tmp_path):
    a = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=2_000)
    b = RecordingWrapper(gym.make("sample_envs/Image-v0", height=8, width=8, episode_length=50),
                         tmp_path, target_batch_bytes=4_000)
    for env, seed in ((a, 1), (b, 2)):
        env.action_space.seed(seed)
        env.reset(seed=seed)
    for _ in range(300):
        for env in (a, b):
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                env.reset()
    a.close()
    b.close()
    with RecordingReader(tmp_path) as reader:
        infos = reader.batches()
        assert len({i.writer for i in infos}) == 2
        check_batches(reader)
        # The reader's order: writer by writer, episode indices ascending.
        flat = [e for i in infos for e in i.episodes]
        assert flat == sorted(flat)


def test_legacy_recordings(tmp_path):
    make_legacy(tmp_path)
    with RecordingReader(tmp_path) as reader:
        infos = reader.batches()
        assert [i.bin_name for i in infos] == ["", "", ""]
        assert [i.episodes for i in infos] == [(0, 1, 2), (3,), (4, 5)]
        check_batches(reader)


def test_a_batch_moved_aside_leaves_the_rest_equal(tmp_path):
    """Repair moved a middle batch aside: its episodes end early or vanish, as for reader[i]."""
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=1_500)
    run_random(env, 800)
    env.close()
    (path,) = tmp_path.glob("*.manifest.json")
    doc = json.loads(path.read_text())
    assert len(doc["batches"]) > 6
    del doc["batches"][3]
    path.write_text(json.dumps(doc))
    with RecordingReader(tmp_path) as reader:
        check_batches(reader)


def test_batch_info_is_small_picklable_and_frozen(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path)
    run_random(env, 50)
    env.close()
    with RecordingReader(tmp_path) as reader:
        (info,) = reader.batches()
        again = pickle.loads(pickle.dumps(info))
        assert again == info and isinstance(again, BatchInfo)
        with pytest.raises(AttributeError):
            info.number = 3
        # Another reader of the same recording reads a pickled BatchInfo just the same.
        with RecordingReader(tmp_path) as other:
            got = other.read_batch(again)
        want = reader.read_batch(info)
        assert [p.episode for p in got] == [p.episode for p in want]
        for p, q in zip(got, want):
            np.testing.assert_array_equal(p.observations, q.observations)


def test_a_batch_of_another_recording_is_refused(tmp_path):
    for name in ("a", "b"):
        env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path / name)
        run_random(env, 30)
        env.close()
    with RecordingReader(tmp_path / "a") as a, RecordingReader(tmp_path / "b") as b:
        (info,) = b.batches()
        with pytest.raises(ValueError, match="is not a batch of this reader"):
            a.read_batch(info)
        fake = BatchInfo(a.batches()[0].writer, 5, "x.json", "x.bin", ())
        with pytest.raises(ValueError, match="is not a batch of this reader"):
            a.read_batch(fake)


def test_a_corrupt_batch_is_refused_as_reading_its_episodes_would(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=2_000)
    run_random(env, 300)
    env.close()
    with RecordingReader(tmp_path) as reader:
        info = reader.batches()[1]
    (tmp_path / info.bin_name).write_bytes(b"\0" * 8)
    with RecordingReader(tmp_path) as reader:
        with pytest.raises(FormatError, match=r"\.ep\d+\.bin: file has 8 bytes, the manifest"):
            reader.read_batch(info)
        with pytest.raises(FormatError, match=r"\.ep\d+\.bin: file has 8 bytes, the manifest"):
            reader[info.episodes[-1]]


def test_batches_are_a_snapshot_until_refresh(tmp_path):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path, target_batch_bytes=2_000)
    run_random(env, 100)
    env.flush()
    reader = RecordingReader(tmp_path)
    before = reader.batches()
    run_random(env, 200, seed=1)
    env.close()
    assert reader.batches() == before
    reader.refresh()
    after = reader.batches()
    assert len(after) > len(before)
    check_batches(reader)
    reader.close()


def test_batches_read_out_of_order_by_fresh_readers(tmp_path):
    """As parallel workers read them: each batch by a reader that read nothing before it."""
    env = RecordingWrapper(gym.make("sample_envs/Image-v0", height=8, width=8,
                                    episode_length=300), tmp_path, target_batch_bytes=4_000)
    run_random(env, 700)
    env.close()
    with RecordingReader(tmp_path) as reader:
        infos = reader.batches()
        want = {(p.episode, p.part): p for info in infos for p in reader.read_batch(info)}
    assert len(infos) > 20
    for info in reversed(infos):
        with RecordingReader(tmp_path) as fresh:
            for p in fresh.read_batch(info):
                q = want.pop((p.episode, p.part))
                assert (p.first_step, p.is_last) == (q.first_step, q.is_last)
                np.testing.assert_array_equal(p.observations, q.observations)
    assert want == {}
    # One reader reading them backwards (what it remembers of later batches must not mislead
    # it about earlier ones).
    with RecordingReader(tmp_path) as one:
        backwards = [p for info in reversed(infos) for p in one.read_batch(info)]
    with RecordingReader(tmp_path) as reader:
        forwards = [p for info in infos for p in reader.read_batch(info)]
    key = lambda p: (p.episode, p.part, p.first_step, p.is_last)  # noqa: E731
    assert sorted(map(key, backwards)) == sorted(map(key, forwards))
    # A single-env batch deep inside a long episode is read without reading the batches
    # between it and the episode's start (the manifest tells their steps).
    names: list[str] = []

    class Counting(LocalStorage):
        def read_bytes(self, name, limit):
            names.append(name)
            return super().read_bytes(name, limit)

    deep = max(infos, key=lambda i: reader_parts_before(infos, i))
    assert reader_parts_before(infos, deep) > 5
    with RecordingReader(Counting(tmp_path)) as fresh:
        names.clear()
        fresh.read_batch(deep)
    assert len(names) <= 2, names  # the batch itself, and the one its episode started in


def reader_parts_before(infos, info) -> int:
    """How many batches before ``info`` hold a part of its first episode."""
    return sum(1 for i in infos if i.writer == info.writer and i.number < info.number
               and info.episodes and info.episodes[0] in i.episodes)
