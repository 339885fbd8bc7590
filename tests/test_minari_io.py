"""Minari both ways: ours -> Minari -> ours is identical; a DataCollector dataset imports equal."""

from __future__ import annotations

import json
import os

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader
from gym_recorder.errors import OutputExistsError

from needs import need_module
from training_helpers import assert_tree, record
from conftest import MissionLike


def _assert_same_recordings(a, b):
    with RecordingReader(a) as ra, RecordingReader(b) as rb:
        assert len(ra) == len(rb) > 0
        assert str(ra.observation_space) == str(rb.observation_space)
        assert str(ra.action_space) == str(rb.action_space)
        assert ra.env_id == rb.env_id
        for x, y in zip(ra, rb):
            w = f"episode {x.index}"
            assert_tree(y.observations, x.observations, f"{w} observations")
            assert_tree(y.actions, x.actions, f"{w} actions")
            assert_tree(y.rewards, x.rewards, f"{w} rewards")
            assert_tree(y.terminations, x.terminations, f"{w} terminations")
            assert_tree(y.truncations, x.truncations, f"{w} truncations")
            assert y.seed == x.seed and y.end == x.end, w
            yield x, y


@pytest.mark.parametrize("env_id, kwargs, episodes", [
    ("CartPole-v1", {}, 6),
    ("sample_envs/Image-v0", {"height": 16, "width": 12, "episode_length": 7}, 3),
    ("sample_envs/NestedDict-v0", {"episode_length": 5}, 3),
])
def test_ours_to_minari_to_ours_is_identical(tmp_path, minari_root, env_id, kwargs, episodes):
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder.integrations.minari_io import export_minari, import_minari

    rec = tmp_path / "rec"
    record(rec, env_id, episodes, seed=5, env_kwargs=kwargs)
    name = "test/" + env_id.replace("/", "-").lower().replace("-v", "-x") + "-v0"
    result = export_minari(rec, name)
    assert result["episodes"] == episodes
    assert sorted(os.listdir(minari_root)) == ["test"]  # the temporary root is gone
    ds = minari.load_dataset(name)
    assert ds.total_episodes == episodes
    first = next(iter(ds.iterate_episodes()))
    with RecordingReader(rec) as reader:
        ep0 = reader[0]
    assert_tree(first.observations, ep0.observations, "what minari reads")  # lossless images
    back = tmp_path / "back"
    imported = import_minari(name, back)
    assert imported["episodes"] == episodes
    list(_assert_same_recordings(rec, back))
    # the dataset's folder (the one holding data/) imports the same
    again = import_minari(minari_root / name, tmp_path / "again")
    assert again["steps"] == imported["steps"]
    with pytest.raises(OutputExistsError, match="exists"):
        export_minari(rec, name)
    with pytest.raises(OutputExistsError, match="exists"):
        import_minari(name, back)


def test_minari_datacollector_dataset_imports_equal(tmp_path, minari_root):
    minari = need_module("minari", 'pip install "minari[create]"')
    need_module("jax", 'pip install "minari[create]"')
    from minari import DataCollector

    from gym_recorder.integrations.minari_io import import_minari

    env = DataCollector(gym.make("CartPole-v1"), record_infos=True)
    env.action_space.seed(0)
    for e in range(4):
        env.reset(seed=10 + e)
        while True:
            _, _, te, tr, _ = env.step(env.action_space.sample())
            if te or tr:
                break
    env.create_dataset("collector/cartpole-v0")
    env.close()
    ds = minari.load_dataset("collector/cartpole-v0")
    back = tmp_path / "back"
    import_minari("collector/cartpole-v0", back)
    with RecordingReader(back) as reader:
        assert len(reader) == ds.total_episodes == 4
        metas = list(ds.storage.get_episode_metadata(ds.episode_indices))
        for ours, theirs, meta in zip(reader, ds.iterate_episodes(), metas):
            w = f"episode {ours.index}"
            for got, want in ((ours.observations, theirs.observations),
                              (ours.actions, theirs.actions), (ours.rewards, theirs.rewards),
                              (ours.terminations, theirs.terminations),
                              (ours.truncations, theirs.truncations)):
                assert np.array_equal(got, want), w
                assert got.dtype == np.asarray(want).dtype, w
            assert ours.seed == meta["seed"] == 10 + ours.index
            assert ours.env_id == "CartPole-v1"
            assert len(ours.infos) == len(ours.rewards) + 1


class _Infos(gym.Wrapper):
    """CartPole with infos of every kind: numbers, arrays, a nested dict, a str, a sparse key."""

    def reset(self, **kwargs):
        obs, _ = self.env.reset(**kwargs)
        self.t = 0
        return obs, self._info(obs)

    def step(self, action):
        obs, r, te, tr, _ = self.env.step(action)
        self.t += 1
        info = self._info(obs)
        if te or tr:
            info["final"] = 1.0  # only in the last step
        return obs, r, te, tr, info

    def _info(self, obs):
        return {"t": self.t, "pos": obs[:2].copy(), "nested": {"ok": self.t % 2 == 0,
                                                              "x": np.float32(self.t / 3)},
                "name": f"step-{self.t}"}


def test_export_keeps_the_infos_minari_can_hold_and_names_the_others(tmp_path, minari_root):
    need_module("minari", 'pip install ".[minari]"')
    from gym_recorder import RecordingWrapper
    from gym_recorder.integrations.minari_io import export_minari, import_minari

    rec = tmp_path / "rec"
    env = RecordingWrapper(_Infos(gym.make("CartPole-v1")), rec)
    env.action_space.seed(1)
    for e in range(3):
        env.reset(seed=e, options={"level": e})
        while not any(env.step(env.action_space.sample())[2:4]):
            pass
    env.close()
    result = export_minari(rec, "test/infos-v0")
    assert set(result["dropped"]) == {"name", "final"}
    assert "not str" in result["dropped"]["name"]
    assert "not in every step" in result["dropped"]["final"]
    import_minari("test/infos-v0", tmp_path / "back")
    for x, y in _assert_same_recordings(rec, tmp_path / "back"):
        assert y.options == {"level": x.index}
        for a, b in zip(x.infos, y.infos):
            assert set(b) == {"t", "pos", "nested"}
            assert b["t"] == a["t"] and b["t"].dtype == np.int64
            assert_tree(b["pos"], a["pos"], "pos")
            assert b["nested"]["ok"] == a["nested"]["ok"]
            assert_tree(b["nested"]["x"], np.asarray(a["nested"]["x"]), "nested x")


class _SequenceEnv(gym.Env):
    """One-step episodes of a Sequence observation space (which Minari cannot store)."""

    observation_space = gym.spaces.Sequence(gym.spaces.Discrete(3))
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return (0, 1), {}

    def step(self, action):
        return (2,), 1.0, True, False, {}


def test_bad_minari_input_is_a_named_error(tmp_path, minari_root):
    need_module("minari", 'pip install ".[minari]"')
    from gym_recorder.errors import UnsupportedSpaceError
    from gym_recorder.integrations.minari_io import export_minari, import_minari

    from gym_recorder import RecordingWrapper

    rec = tmp_path / "rec"
    env = RecordingWrapper(_SequenceEnv(), rec)
    env.reset(seed=0)
    env.step(0)
    env.close()
    with pytest.raises(UnsupportedSpaceError, match="observation space: Minari cannot store a "
                                                    "Sequence space"):
        export_minari(rec, "test/seq-v0")
    assert not (minari_root / "test" / "seq-v0").exists()
    assert [p.name for p in minari_root.iterdir()] == []
    with pytest.raises(FileNotFoundError, match="nothing-v0 not found"):
        import_minari("test/nothing-v0", tmp_path / "out")
    assert not (tmp_path / "out").exists()


class _Ring(gym.spaces.Space):
    """A space gym_recorder does not know (Minari learns it through its registries)."""

    def __init__(self):
        super().__init__(shape=(2,), dtype=np.float32)

    def sample(self, mask=None, probability=None):
        return self.np_random.uniform(-1, 1, size=2).astype(np.float32)

    def contains(self, x):
        return np.shape(x) == (2,)


def test_minari_dataset_with_a_space_we_cannot_represent_is_refused(tmp_path, minari_root):
    minari = need_module("minari", 'pip install ".[minari]"')
    from minari.data_collector import EpisodeBuffer
    from minari.serialization import deserialize_space, serialize_space

    from gym_recorder.errors import UnsupportedSpaceError
    from gym_recorder.integrations.minari_io import import_minari

    serialize_space.register(_Ring)(
        lambda space, to_string=True: '{"type": "GymRecorderTestRing"}' if to_string
        else {"type": "GymRecorderTestRing"})
    deserialize_space.register("GymRecorderTestRing")(lambda d: _Ring())
    buf = EpisodeBuffer(id=0, observations=np.zeros((3, 2), np.float32),
                        actions=np.zeros(2, np.int64), rewards=[0.0, 1.0],
                        terminations=[False, True], truncations=[False, False])
    minari.create_dataset_from_buffers("test/ring-v0", [buf], observation_space=_Ring(),
                                       action_space=gym.spaces.Discrete(2))
    with pytest.raises(UnsupportedSpaceError, match="observation space: the space .* cannot be "
                                                    "represented"):
        import_minari("test/ring-v0", tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["minari_root"]


def test_export_skips_zero_step_episodes_and_describes_the_selected_writer(tmp_path, minari_root,
                                                                          capsys):
    """A recording loop that ends on reset-then-close leaves a 0-step episode: the export keeps
    every other episode exactly and names the skipped ones; a directory of two envs exports the
    chosen env's episodes with that env's spaces (not the first writer's)."""
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder import RecordingWrapper, cli
    from gym_recorder.read.envgroups import MixedEnvsWarning
    from gym_recorder.errors import EmptySelectionError, UnsupportedSpaceError
    from gym_recorder.integrations.minari_io import export_minari

    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 3, seed=1)
    env = RecordingWrapper(gym.make("CartPole-v1"), rec)
    env.reset(seed=9)
    env.reset()   # reset, reset: 0 steps
    env.close()   # reset, close: 0 steps
    result = export_minari(rec, "test/cp-v0")
    assert result["episodes"] == 3 and result["skipped"] == [3, 4]
    ds = minari.load_dataset("test/cp-v0")
    with RecordingReader(rec) as reader:
        assert ds.total_episodes == 3
        for got, ep in zip(ds.iterate_episodes(), reader):
            assert_tree(got.observations, ep.observations, f"episode {ep.index}")
            assert_tree(got.actions, ep.actions, f"episode {ep.index}")
    with pytest.raises(EmptySelectionError, match="every selected episode has 0 steps"):
        export_minari(rec, "test/none-v0", episodes=[3, 4])
    with pytest.raises(EmptySelectionError):
        export_minari(rec, "test/none-v0", episodes=[])
    with pytest.raises(ValueError, match="'bad' is not a Minari dataset id"):
        export_minari(rec, "bad")
    with pytest.warns(MixedEnvsWarning):
        record(rec, "Pendulum-v1", 2, seed=0, env_kwargs={"max_episode_steps": 6})
    with pytest.raises(UnsupportedSpaceError, match="different spaces; choose one env"):
        export_minari(rec, "test/mixed-v0")
    assert cli.main(["export", str(rec), "--format", "minari", "--dataset-id", "test/pend-v0",
                     "--env", "Pendulum-v1"]) == 0
    assert "2 episodes, 12 steps" in capsys.readouterr().out
    pend = minari.load_dataset("test/pend-v0")
    assert pend.observation_space.shape == (3,) and pend.env_spec.id == "Pendulum-v1"
    assert next(iter(pend.iterate_episodes())).observations.shape == (7, 3)
    assert sorted(os.listdir(minari_root / "test")) == ["cp-v0", "namespace_metadata.json",
                                                      "pend-v0"]


def test_export_refuses_dict_keys_minari_would_read_back_as_paths(tmp_path, minari_root):
    need_module("minari", 'pip install ".[minari]"')
    from gym_recorder import RecordingWrapper
    from gym_recorder.errors import UnsupportedSpaceError
    from gym_recorder.integrations.minari_io import export_minari

    space = gym.spaces.Dict({"a/b": gym.spaces.Discrete(3), "c": gym.spaces.Discrete(2)})
    env = RecordingWrapper(gym.wrappers.TimeLimit(_SlashEnv(space), 4), tmp_path / "rec")
    env.reset(seed=0)
    for _ in range(4):
        env.step(0)
    env.close()
    with pytest.raises(UnsupportedSpaceError, match="cannot store the Dict key 'a/b'"):
        export_minari(tmp_path / "rec", "test/slash-v0")
    assert not minari_root.exists() or os.listdir(minari_root) == []


class _SlashEnv(gym.Env):
    def __init__(self, space):
        self.observation_space, self.action_space = space, gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 0.0, False, False, {}


def test_damaged_minari_datasets_are_named_errors_and_write_nothing(tmp_path, minari_root):
    """A truncated HDF5 file, metadata that is not JSON, an episode whose rewards are shorter
    than its actions: DatasetError naming the dataset (no h5py or json traceback)."""
    minari = need_module("minari", 'pip install ".[minari]"')
    import json
    import shutil

    import h5py

    from gym_recorder.errors import DatasetError, DatasetNotFoundError
    from gym_recorder.integrations.minari_io import export_minari, import_minari

    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 3, seed=2)
    export_minari(rec, "test/good-v0")
    good = minari_root / "test" / "good-v0"
    [main] = list((good / "data").glob("*.hdf5"))

    def damaged(name, damage):
        d = minari_root / "test" / name
        shutil.copytree(good, d)
        damage(d / "data")
        return d

    def truncate(data):
        p = data / main.name
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])

    def bad_json(data):
        (data / "metadata.json").write_text("{not json")

    def short_rewards(data):
        with h5py.File(data / main.name, "r+") as f:
            rewards = f["episode_1"]["rewards"][:2]
            del f["episode_1"]["rewards"]
            f["episode_1"].create_dataset("rewards", data=rewards)

    for name, damage, match in (("trunc-v0", truncate, "cannot be read"),
                                ("json-v0", bad_json, "cannot be read"),
                                ("short-v0", short_rewards, "episode 1: actions have")):
        d = damaged(name, damage)
        out = tmp_path / f"out-{name}"
        for source in (d, f"test/{name}"):
            with pytest.raises(DatasetError, match=match):
                import_minari(source, out)
            assert not out.exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []
    with pytest.raises(DatasetNotFoundError, match="not a Minari dataset folder"):
        import_minari(tmp_path / "rec", tmp_path / "out")
    assert minari.load_dataset("test/good-v0").total_episodes == 3


@pytest.mark.parametrize("mode", ["sync", "vector_entry_point"])
def test_vector_recording_exports_with_the_sub_env_spec(tmp_path, minari_root, mode):
    """The spec of a make_vec env holds make_vec's arguments (num_envs, vectorization_mode, and
    max_episode_steps for a native vector env); Minari makes the env from the spec, so they
    must not reach the single env (CartPoleEnv() got num_envs: the export failed)."""
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder import RecordingVectorWrapper
    from gym_recorder.integrations.minari_io import export_minari

    rec = tmp_path / "rec"
    envs = RecordingVectorWrapper(gym.make_vec("CartPole-v1", num_envs=2,
                                               vectorization_mode=mode), rec)
    envs.action_space.seed(0)
    envs.reset(seed=0)
    for _ in range(30):
        envs.step(envs.action_space.sample())
    envs.close()
    result = export_minari(rec, "test/vec-v0")
    assert result["env_spec_dropped"] is None
    ds = minari.load_dataset("test/vec-v0")
    assert ds.env_spec.id == "CartPole-v1" and ds.env_spec.kwargs == {}
    with RecordingReader(rec) as reader:
        kept = [ep for ep in reader if ep.length]
        assert ds.total_episodes == len(kept)
        for got, ep in zip(ds.iterate_episodes(), kept):
            assert_tree(got.observations, ep.observations, f"episode {ep.index}")
            assert_tree(got.actions, ep.actions, f"episode {ep.index}")
    ds.recover_environment().close()


def test_an_env_that_cannot_be_made_again_exports_with_the_spaces_only(tmp_path, minari_root,
                                                                       monkeypatch):
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder.integrations.minari_io import export_minari

    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 2, seed=3)

    def refuse(*args, **kwargs):
        raise RuntimeError("no display\nsecond line")

    monkeypatch.setattr(gym, "make", refuse)
    result = export_minari(rec, "test/cp-v0")
    assert result["env_spec_dropped"].startswith(
        "gymnasium.make('CartPole-v1') with the recorded kwargs and wrappers failed "
        "(RuntimeError: no display)")
    ds = minari.load_dataset("test/cp-v0")
    assert ds.total_episodes == 2 and ds.env_spec is None
    assert ds.observation_space.shape == (4,)


def test_export_keeps_the_recorded_time_limit(tmp_path, minari_root):
    """gym.make(id, max_episode_steps=N) is in the recorded spec: the dataset's env spec (and the
    env recover_environment() makes) has N, not the registry's limit."""
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder.integrations.minari_io import export_minari

    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 3, seed=0, env_kwargs={"max_episode_steps": 7})
    export_minari(rec, "test/cp-v0")
    ds = minari.load_dataset("test/cp-v0")
    assert ds.env_spec.max_episode_steps == 7
    env = ds.recover_environment()
    assert env.spec.max_episode_steps == 7
    env.close()


def test_export_keeps_the_recorded_wrappers_or_leaves_the_env_out(tmp_path, minari_root):
    """The wrappers between gymnasium.make and the recorder are in the dataset's env spec, so
    recover_environment() has the dataset's spaces (it gave the bare Dict env for a
    FlattenObservation recording); a wrapper that cannot be rebuilt and changes the spaces
    leaves the env out, saying why."""
    minari = need_module("minari", 'pip install ".[minari]"')
    from gymnasium.wrappers import FlattenObservation, TransformObservation

    from gym_recorder import RecordingWrapper
    from gym_recorder.integrations.minari_io import export_minari

    def rec(path, wrap):
        env = RecordingWrapper(wrap(gym.make("sample_envs/NestedDict-v0", episode_length=4)),
                               path)
        env.action_space.seed(0)
        env.reset(seed=0)
        for _ in range(4):
            env.step(env.action_space.sample())
        env.close()

    rec(tmp_path / "flat", FlattenObservation)
    assert export_minari(tmp_path / "flat", "test/flat-v0")["dropped"] == {}
    ds = minari.load_dataset("test/flat-v0")
    assert [w.name for w in ds.env_spec.additional_wrappers] == ["FlattenObservation"]
    env = ds.recover_environment()
    assert env.observation_space == ds.observation_space
    env.close()

    box = gym.spaces.Box(-1, 1, (3,), np.float32)
    rec(tmp_path / "lam", lambda e: TransformObservation(e, lambda o: o["position"], box))
    result = export_minari(tmp_path / "lam", "test/lam-v0")
    assert "other spaces than the recording" in result["env_spec_dropped"]
    assert "TransformObservation" in result["env_spec_dropped"]
    ds = minari.load_dataset("test/lam-v0")
    assert ds.env_spec is None and ds.observation_space == box


class _EnvOnlyWrapper(gym.ObservationWrapper):
    """Like minigrid's ImgObsWrapper: not a RecordConstructorArgs, but takes only ``env``."""

    def __init__(self, env):
        super().__init__(env)
        self.observation_space = env.observation_space["position"]

    def observation(self, observation):
        return observation["position"]


def test_export_keeps_a_wrapper_that_takes_only_env(tmp_path, minari_root):
    """env.spec lists such a wrapper with kwargs None, which gymnasium.make refuses: the dataset's
    spec has kwargs {} instead, so recover_environment() works (it raised "does not inherit from
    RecordConstructorArgs"; before replay rebuilt such wrappers the env was left out)."""
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder import RecordingWrapper
    from gym_recorder.integrations.minari_io import export_minari

    env = RecordingWrapper(_EnvOnlyWrapper(gym.make("sample_envs/NestedDict-v0",
                                                    episode_length=4)), tmp_path / "rec")
    env.action_space.seed(0)
    env.reset(seed=0)
    for _ in range(4):
        env.step(env.action_space.sample())
    env.close()
    assert export_minari(tmp_path / "rec", "test/envonly-v0")["dropped"] == {}
    ds = minari.load_dataset("test/envonly-v0")
    (w,) = ds.env_spec.additional_wrappers
    assert w.name == "_EnvOnlyWrapper" and w.kwargs == {}
    env = ds.recover_environment()
    assert env.observation_space == ds.observation_space
    env.close()


def test_export_names_an_unknown_space_inside_a_dict(tmp_path, minari_root):
    """minigrid's Dict observation holds a MissionSpace: the export said "observation space: no
    space recorded"; it names the key and the class."""
    need_module("minari", 'pip install ".[minari]"')
    from gym_recorder import RecordingWrapper
    from gym_recorder.errors import UnsupportedSpaceError
    from gym_recorder.integrations.minari_io import export_minari

    class Env(gym.Env):
        observation_space = gym.spaces.Dict({"direction": gym.spaces.Discrete(4),
                                             "mission": MissionLike()})
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return {"direction": 0, "mission": "go"}, {}

        def step(self, action):
            return {"direction": 1, "mission": "go"}, 0.0, True, False, {}

    with RecordingWrapper(Env(), tmp_path / "rec") as rec:
        rec.reset(seed=0)
        rec.step(0)
    with pytest.raises(UnsupportedSpaceError, match=r"observation space\['mission'\] is a "
                       r"conftest.MissionLike, a space gym_recorder does not know"):
        export_minari(tmp_path / "rec", "test/mission-v0")


def test_an_env_spec_that_is_not_an_object_exports_with_the_spaces(tmp_path, minari_root):
    """A manifest whose env_spec is not a JSON object (the reader accepts it): the export raised
    AttributeError ('list' object has no attribute 'get'); the env is made from the registry."""
    minari = need_module("minari", 'pip install ".[minari]"')
    from gym_recorder.integrations.minari_io import export_minari

    rec = tmp_path / "rec"
    record(rec, "CartPole-v1", 2)
    (manifest,) = rec.glob("*.manifest.json")
    doc = json.loads(manifest.read_text())
    doc["env_spec"] = ["not", "a", "dict"]
    manifest.write_text(json.dumps(doc))
    result = export_minari(rec, "test/odd-v0")
    assert result["episodes"] == 2 and result["env_spec_dropped"] is None
    assert minari.load_dataset("test/odd-v0").env_spec.id == "CartPole-v1"


class _InfoKeysEnv(gym.Env):
    """Info keys that look like the pseudo-key the export once used ("<env spec>"), present in
    some steps only (so Minari cannot stack them)."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        info = {"<lives>": "x", "<env spec>": "y"} if self.t == 2 else {}
        return np.zeros(2, np.float32), 0.0, self.t >= 4, False, info


def test_dropped_info_keys_and_the_env_spec_are_told_apart(tmp_path, minari_root, capsys):
    """Info keys "<lives>" and "<env spec>" were printed as the env spec ("lives not exported",
    "env spec not exported"), the real env spec reason hidden behind the info's."""
    need_module("minari", 'pip install ".[minari]"')
    from gym_recorder import RecordingWrapper, cli

    rec = tmp_path / "rec"
    with RecordingWrapper(_InfoKeysEnv(), rec) as env:
        env.reset(seed=0)
        for _ in range(4):
            env.step(0)
    assert cli.main(["export", str(rec), "--format", "minari", "--dataset-id",
                     "test/keys-v0"]) == 0
    out = capsys.readouterr().out
    assert "info '<lives>' not exported" in out and "info '<env spec>' not exported" in out
    assert "env spec not exported" not in out.replace("info '<env spec>' not exported", "")
