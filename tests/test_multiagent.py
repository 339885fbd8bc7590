"""Recording PettingZoo envs (AEC and Parallel): every agent's arrays as the env returned them."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from gymnasium import spaces as gym_spaces  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from multiagent_helpers import (JoiningEnv, check_aec, check_parallel, copy_obs,  # noqa: E402
                                play_aec, play_parallel)
from pettingzoo import ParallelEnv  # noqa: E402
from pettingzoo.butterfly import knights_archers_zombies_v11 as kaz  # noqa: E402
from pettingzoo.classic import connect_four_v3, tictactoe_v3  # noqa: E402
from pettingzoo.sisl import pursuit_v5  # noqa: E402
from pettingzoo.utils.conversions import aec_to_parallel, parallel_to_aec  # noqa: E402

from gym_recorder.errors import FormatError, ResetNeeded  # noqa: E402
from gym_recorder.format.agents import MULTIAGENT_VERSION  # noqa: E402
from gym_recorder import RecordingReader  # noqa: E402
from gym_recorder.record.multiagent import (RecordingAECWrapper,  # noqa: E402
                                            RecordingParallelWrapper)


@pytest.mark.parametrize("make", [tictactoe_v3.env, connect_four_v3.env])
def test_aec_classic_games_every_agent_as_last_gave_it(tmp_path, make):
    env = RecordingAECWrapper(make(), tmp_path)
    games = play_aec(env, seed=3, episodes=3)
    env.close()
    check_aec(tmp_path, games)
    man = json.loads(next(tmp_path.glob("*.manifest.json")).read_text())
    assert man["version"] == MULTIAGENT_VERSION
    assert man["multiagent"]["api"] == "aec"
    assert man["multiagent"]["agents"] == list(make().possible_agents)


def test_aec_final_reward_is_in_the_dead_turn(tmp_path):
    """A finished agent's final reward shows only in its None turn's last(): recorded there."""
    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path)
    games = play_aec(env, seed=0, episodes=6)
    env.close()
    with RecordingReader(tmp_path) as reader:
        for ep, seen in zip(reader, games):
            for name, rows in seen.items():
                view = ep.agents[name]
                assert not view.acted[-1] and view.terminations[-1]
                assert view.rewards[-1] == rows[-1][1]
                assert ep.actions["given"][view.rows[-1], ep.multiagent.agents.index(name)] \
                    == False  # noqa: E712
    assert any(g[n][-1][1] != 0 for g in games for n in g)  # some game was won


def test_parallel_agents_die_mid_episode(tmp_path):
    env = RecordingParallelWrapper(kaz.parallel_env(max_cycles=200, spawn_delay=3), tmp_path)
    runs = play_parallel(env, seed=4)
    env.close()
    check_parallel(tmp_path, runs)
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
        lengths = {a: len(v) for a, v in ep.agents.items()}
        assert len(set(lengths.values())) > 1, lengths  # agents left at different steps
        assert ep.end == "terminated"


def test_parallel_pursuit_truncates(tmp_path):
    env = RecordingParallelWrapper(pursuit_v5.parallel_env(max_cycles=30), tmp_path)
    runs = play_parallel(env, seed=1, episodes=2)
    env.close()
    check_parallel(tmp_path, runs)
    with RecordingReader(tmp_path) as reader:
        assert [ep.end for ep in reader] == ["truncated", "truncated"]


def test_conversions_parallel_to_aec_and_back(tmp_path):
    aec = RecordingAECWrapper(parallel_to_aec(pursuit_v5.parallel_env(max_cycles=8)),
                              tmp_path / "aec")
    games = play_aec(aec, seed=2)
    aec.close()
    with RecordingReader(tmp_path / "aec") as reader:
        ep = reader[0]
        assert ep.end == "truncated"
        for name, rows in games[0].items():
            view = ep.agents[name]
            assert len(view) == len(rows)
            for i, row in enumerate(rows):
                np.testing.assert_array_equal(view.observations[i], row[0])
                assert view.rewards[i] == row[1]
    par = RecordingParallelWrapper(aec_to_parallel(pursuit_v5.env(max_cycles=12)),
                                   tmp_path / "par")
    runs = play_parallel(par, seed=5)
    par.close()
    check_parallel(tmp_path / "par", runs)


def test_pettingzoo_api_tests_pass_on_the_wrapped_envs(tmp_path):
    from pettingzoo.test import api_test, parallel_api_test

    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path / "a")
    api_test(env, num_cycles=50)
    env.close()
    par = RecordingParallelWrapper(pursuit_v5.parallel_env(max_cycles=20), tmp_path / "p")
    parallel_api_test(par, num_cycles=30)
    par.close()
    with RecordingReader(tmp_path / "a") as reader:
        assert len(reader) >= 1


def test_single_agent_recordings_stay_version_1_and_misuse_is_named(tmp_path):
    import gymnasium as gym

    from gym_recorder import RecordingWrapper

    with RecordingWrapper(gym.make("CartPole-v1"), tmp_path / "s") as env:
        env.reset(seed=0)
        env.step(0)
    man = json.loads(next((tmp_path / "s").glob("*.manifest.json")).read_text())
    assert man["version"] == 1 and "multiagent" not in man
    with RecordingReader(tmp_path / "s") as reader:
        with pytest.raises(AttributeError, match="single-agent"):
            reader[0].agents
    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path / "m")
    with pytest.raises(ResetNeeded):
        env.step(0)
    env.reset(seed=0)
    env.close()
    with RecordingReader(tmp_path / "m") as reader:
        with pytest.raises(KeyError, match="player_1"):
            reader[0].agents["nobody"]
        assert reader[0].end == "close"


def test_a_multiagent_manifest_that_lies_is_refused(tmp_path):
    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path)
    play_aec(env, seed=0)
    env.close()
    path = next(tmp_path.glob("*.manifest.json"))
    good = json.loads(path.read_text())
    for change, match in [
            (lambda m: m.__setitem__("version", 1), "needs version 2"),
            (lambda m: m["multiagent"].__setitem__("api", "turns"), "api must be one of"),
            (lambda m: m["multiagent"].__setitem__("agents", ["a", "a"]), "distinct strings"),
            (lambda m: m["multiagent"].__setitem__("agents", ["x", "y"]), "not the agents"),
            (lambda m: m["multiagent"].__setitem__("agents", ["player_1"]), "shape \\[1\\]")]:
        doc = json.loads(json.dumps(good))
        change(doc)
        path.write_text(json.dumps(doc))
        with pytest.raises(FormatError, match=match):
            RecordingReader(tmp_path)


def test_supersuit_wrappers_black_death_and_frame_stack(tmp_path):
    supersuit = pytest.importorskip("supersuit")
    env = supersuit.frame_stack_v1(supersuit.black_death_v3(
        kaz.parallel_env(max_cycles=200, spawn_delay=3)), 3)
    env = RecordingParallelWrapper(env, tmp_path)
    runs = play_parallel(env, seed=4)
    env.close()
    check_parallel(tmp_path, runs)
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
        # black_death keeps dead agents in every step, with zero observations
        assert all(len(v) == len(ep) + 1 for v in ep.agents.values())
        assert ep.agents["knight_0"].observations.shape[1:] == (27, 5, 3)


def test_aec_rows_are_exact_however_the_user_observes(tmp_path):
    """The recorder keeps the observation the user's last() got, and observes itself when
    nobody did."""
    bare = tictactoe_v3.env()
    bare.reset(seed=0)
    moves, seen = [], []  # a whole game of first legal moves, and what each turn observed
    for agent in bare.agent_iter():
        obs, _, term, trunc, _ = bare.last()
        seen.append((agent, copy_obs(obs)))
        moves.append(None if term or trunc else int(np.flatnonzero(obs["action_mask"])[-1]))
        bare.step(moves[-1])
    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path / "a")
    env.reset(seed=0)
    for t, move in enumerate(moves):
        if t % 2 == 0:  # every other turn: no last(), no observe()
            env.last()
        env.step(move)
    env.close()
    with RecordingReader(tmp_path / "a") as reader:
        ep = reader[0]
        assert len(ep) == len(moves)
        for t, (agent, obs) in enumerate(seen):
            got = ep.observations["observations"][agent]
            np.testing.assert_array_equal(got["observation"][t], obs["observation"])
            np.testing.assert_array_equal(got["action_mask"][t], obs["action_mask"])
    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path / "b")
    env.reset(seed=1)
    env.close()  # the reset row, observed at close
    with RecordingReader(tmp_path / "b") as reader:
        ep = reader[0]
        assert len(ep) == 0 and ep.end == "close"
        assert ep.observations["observed"][0].tolist() == [True, False]
        assert ep.observations["observations"]["player_1"]["action_mask"][0].all()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_records_from_its_next_reset_into_a_writer_of_its_own(tmp_path):
    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path)
    env.reset(seed=0)
    env.step(0)
    pid = os.fork()
    if pid == 0:  # the child: its step passes through, its reset records anew
        code = 1
        try:
            env.step(1)  # (no error: not recorded)
            env.reset(seed=9)
            env.step(4)
            env.close()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    env.step(1)
    env.close()
    with RecordingReader(tmp_path) as reader:
        assert len(reader.writers) == 2
        by_seed = {ep.seed: ep for ep in reader}
        assert len(by_seed[0]) == 2 and by_seed[0].actions["actions"]["player_2"][1] == 1
        assert len(by_seed[9]) == 1 and by_seed[9].actions["actions"]["player_1"][0] == 4


def test_many_writers_small_batches_the_batch_index_and_verify(tmp_path):
    from gym_recorder.integrity import verify
    from gym_recorder.training.transitions import transitions

    runs = []
    for w in range(2):  # two writers in one directory, many small batches each
        env = RecordingParallelWrapper(pursuit_v5.parallel_env(max_cycles=15), tmp_path,
                                       target_batch_bytes=20_000)
        runs += play_parallel(env, seed=10 * w, episodes=2)
        env.close()
    manifests = [json.loads(p.read_text()) for p in tmp_path.glob("*.manifest.json")]
    assert len(manifests) == 2
    assert all(len(m["batches"]) > 2 and all("index" in b for b in m["batches"])
               for m in manifests)
    assert verify(tmp_path) == []
    check_parallel(tmp_path, runs)  # (episodes split over batches join back exactly)
    with RecordingReader(tmp_path) as reader:
        t = transitions(reader, agent="pursuer_0")
        assert len(t) == sum(len(r) - 1 for r in runs)


def test_agents_join_and_leave_and_extra_keys_are_kept(tmp_path):
    env = RecordingParallelWrapper(JoiningEnv(), tmp_path)
    runs = play_parallel(env, seed=0)
    env.close()
    steps = runs[0]
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
        assert len(ep) == 5 and ep.end == "truncated"
        late, early = ep.agents["late"], ep.agents["early"]
        assert late.rows.tolist() == [2, 3, 4, 5] and early.rows.tolist() == [0, 1, 2, 3]
        assert late.observations.tolist() == [2, 3, 4, 5]
        assert early.terminations.tolist() == [False, False, False, True]
        assert late.truncations.tolist() == [False, False, False, True]
        assert ep.observations["live"][:, 1].tolist() == [False, False, True, True, True, False]
        # keys of possible_agents only are columns; "common" is kept in the info row
        assert ep.infos[0]["common"] == {"note": "start"}
        assert ep.infos[0]["__extra__"]["observations"]["common"].tolist() == [0]
        assert ep.infos[3]["__extra__"]["rewards"] == {"common": 0.5}
        assert ep.infos[3]["early"] == {"t": 3}
        for t, s in enumerate(steps):
            np.testing.assert_array_equal(ep.infos[t]["__extra__"]["observations"]["common"],
                                          s[1]["common"])


def _space_strategy():
    from hypothesis import strategies as st

    leaf = st.sampled_from([
        gym_spaces.Box(-2, 2, (3,), np.float32), gym_spaces.Box(0, 255, (2, 2), np.uint8),
        gym_spaces.Discrete(4), gym_spaces.MultiDiscrete([2, 3]), gym_spaces.MultiBinary(3),
        gym_spaces.Box(-1, 1, (), np.float64), gym_spaces.Text(4),
        gym_spaces.Text(3, min_length=2), gym_spaces.Sequence(gym_spaces.Discrete(3))])
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, min_size=1, max_size=2).map(lambda xs: gym_spaces.Tuple(xs)),
        st.lists(inner, min_size=1, max_size=2).map(
            lambda xs: gym_spaces.Dict({f"k{i}": x for i, x in enumerate(xs)}))), max_leaves=3)


class RandomEnv(ParallelEnv):
    """Agents of the given spaces; at each step a random subset is in the dicts."""

    metadata = {"name": "random_v0"}

    def __init__(self, obs_spaces, act_spaces, steps, seed):
        self.possible_agents = [f"a{i}" for i in range(len(obs_spaces))]
        self._obs = dict(zip(self.possible_agents, obs_spaces))
        self._act = dict(zip(self.possible_agents, act_spaces))
        self._steps, self._rng = steps, np.random.default_rng(seed)
        for k, s in enumerate([*obs_spaces, *act_spaces]):
            s.seed(seed + k)

    def observation_space(self, agent):
        return self._obs[agent]

    def action_space(self, agent):
        return self._act[agent]

    def _some(self):
        return [a for a in self.possible_agents if self._rng.random() < 0.7]

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = list(self.possible_agents)
        return {a: self._obs[a].sample() for a in self._some()}, {}

    def step(self, actions):
        self.t += 1
        present = self._some()
        done = self.t >= self._steps
        if done:
            self.agents = []
        return ({a: self._obs[a].sample() for a in present},
                {a: float(self._rng.normal()) for a in present},
                {a: False for a in present}, {a: done for a in present},
                {a: {"t": self.t} for a in present})


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_per_agent_spaces_round_trip_exactly(tmp_path_factory, data):
    from gym_recorder.replay.compare import first_difference, tree_row

    n = data.draw(st.integers(1, 3))
    obs_spaces = [data.draw(_space_strategy()) for _ in range(n)]
    act_spaces = [data.draw(_space_strategy()) for _ in range(n)]
    env = RandomEnv(obs_spaces, act_spaces, data.draw(st.integers(1, 5)), data.draw(
        st.integers(0, 1000)))
    directory = tmp_path_factory.mktemp("random")
    rec = RecordingParallelWrapper(env, directory, target_batch_bytes=2000)
    obs, infos = rec.reset(seed=0)
    steps = [(None, copy_obs(obs))]
    while rec.agents:
        actions = {a: rec.action_space(a).sample() for a in rec.agents
                   if env._rng.random() < 0.8}
        obs, *_ = rec.step(actions)
        steps.append((actions, copy_obs(obs)))
    rec.close()
    with RecordingReader(directory) as reader:
        ep = reader[0]
        for t, (actions, o) in enumerate(steps):
            for a in env.possible_agents:
                assert ep.observations["observed"][t, env.possible_agents.index(a)] == (a in o)
                if a in o:
                    got = tree_row(ep.observations["observations"][a], t)
                    assert first_difference(got, o[a]) is None, (a, t)
                if actions is not None and a in actions:
                    got = tree_row(ep.actions["actions"][a], t - 1)
                    assert first_difference(got, actions[a]) is None, (a, t)


def test_compression_and_metadata_as_for_single_agent_recordings(tmp_path, capsys):
    """Image observations of a Parallel env recorded zstd-compressed read back exactly (every
    agent's arrays against what the env returned), and metadata reaches the manifest and info."""
    from pettingzoo.butterfly import pistonball_v6

    from gym_recorder.cli import main

    env = RecordingParallelWrapper(pistonball_v6.parallel_env(n_pistons=4, max_cycles=12),
                                   tmp_path, compression="zstd",
                                   metadata={"author": "tests", "policy": "random"})
    runs = play_parallel(env, seed=1)
    env.close()
    check_parallel(tmp_path, runs)
    manifest = json.loads(next(tmp_path.glob("*.manifest.json")).read_text())
    assert manifest["metadata"] == {"author": "tests", "policy": "random"}
    assert any(b.get("codecs") for b in manifest["batches"])  # the frames were compressed
    stored = sum(os.path.getsize(p) for p in tmp_path.glob("*.bin"))
    with RecordingReader(tmp_path) as reader:
        frames = reader[0].observations["observations"]
        raw = sum(v.nbytes for v in frames.values())
    assert stored * 5 < raw, (stored, raw)
    capsys.readouterr()
    assert main(["info", str(tmp_path)]) == 0
    shown = capsys.readouterr().out
    assert "policy" in shown and "random" in shown and "piston_0" in shown
