"""Recording PettingZoo envs (AEC and Parallel): every agent's arrays as the env returned them."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("pettingzoo")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from pettingzoo.butterfly import knights_archers_zombies_v11 as kaz  # noqa: E402
from pettingzoo.classic import connect_four_v3, tictactoe_v3  # noqa: E402
from pettingzoo.sisl import pursuit_v5  # noqa: E402
from gymnasium import spaces as gym_spaces  # noqa: E402
from pettingzoo import ParallelEnv  # noqa: E402
from pettingzoo.utils.conversions import aec_to_parallel, parallel_to_aec  # noqa: E402

from gym_recorder import RecordingReader  # noqa: E402
from gym_recorder.errors import FormatError, ResetNeeded  # noqa: E402
from gym_recorder.format.agents import MULTIAGENT_VERSION  # noqa: E402
from gym_recorder.record.multiagent import (RecordingAECWrapper,  # noqa: E402
                                            RecordingParallelWrapper)


def _copy(x):
    if isinstance(x, dict):
        return {k: _copy(v) for k, v in x.items()}
    return np.array(x, copy=True) if isinstance(x, np.ndarray) else x


def play_aec(env, seed, episodes=1):
    """Plays random legal moves; returns, per episode, per agent, what last() gave before each
    of its turns and the action it took."""
    games = []
    for e in range(episodes):
        env.reset(seed=seed + e)
        rng = np.random.default_rng(seed + e)
        seen = {a: [] for a in env.possible_agents}
        for agent in env.agent_iter():
            obs, reward, term, trunc, info = env.last()
            if term or trunc:
                action = None
            else:
                mask = obs["action_mask"] if isinstance(obs, dict) else None
                action = (int(rng.choice(np.flatnonzero(mask))) if mask is not None
                          else env.action_space(agent).sample())
            seen[agent].append((_copy(obs), reward, term, trunc, _copy(info), action))
            env.step(action)
        games.append(seen)
    return games


def check_aec(directory, games):
    with RecordingReader(directory) as reader:
        assert len(reader) == len(games)
        for ep, seen in zip(reader, games):
            assert ep.multiagent.api == "aec" and ep.end == "terminated"
            turns = sum(len(v) for v in seen.values())
            assert len(ep) == turns
            for name, rows in seen.items():
                view = ep.agents[name]
                assert len(view) == len(rows)
                for i, (obs, reward, term, trunc, info, action) in enumerate(rows):
                    got = {k: v[i] for k, v in view.observations.items()} \
                        if isinstance(view.observations, dict) else view.observations[i]
                    if isinstance(obs, dict):
                        for key in obs:
                            np.testing.assert_array_equal(got[key], obs[key])
                            assert got[key].dtype == np.asarray(obs[key]).dtype
                    else:
                        np.testing.assert_array_equal(got, obs)
                    assert view.rewards[i] == reward
                    assert view.terminations[i] == term and view.truncations[i] == trunc
                    assert view.infos[i] == info
                    assert view.acted[i] == (action is not None)
                    if action is not None:
                        assert view.actions[i] == action
            # The turn order, as the env gave it.
            order = ep.observations["agent_selection"]
            assert order[-1] == -1 and (order[:-1] >= 0).all()


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


def play_parallel(env, seed, episodes=1):
    runs = []
    for e in range(episodes):
        obs, infos = env.reset(seed=seed + e)
        for a in env.possible_agents:
            env.action_space(a).seed(seed + e)
        steps = [(None, _copy(obs), {}, {}, {}, _copy(infos), list(env.agents))]
        while env.agents:
            actions = {a: env.action_space(a).sample() for a in env.agents}
            result = env.step(actions)
            steps.append((actions, *(_copy(r) for r in result), list(env.agents)))
        runs.append(steps)
    return runs


def check_parallel(directory, runs):
    with RecordingReader(directory) as reader:
        assert len(reader) == len(runs)
        for ep, steps in zip(reader, runs):
            assert ep.multiagent.api == "parallel"
            assert len(ep) == len(steps) - 1
            agents = ep.multiagent.agents
            for t, (actions, obs, rew, term, trunc, infos, live) in enumerate(steps):
                assert ep.infos[t] == infos
                assert [a for k, a in enumerate(agents) if ep.observations["live"][t, k]] == live
                for k, a in enumerate(agents):
                    assert ep.observations["observed"][t, k] == (a in obs)
                    if a in obs:
                        got = ep.observations["observations"][a][t]
                        np.testing.assert_array_equal(got, obs[a])
                        assert got.dtype == obs[a].dtype
                    assert ep.observations["rewards"][t, k] == rew.get(a, 0.0)
                    assert ep.observations["terminations"][t, k] == term.get(a, False)
                    assert ep.observations["truncations"][t, k] == trunc.get(a, False)
                    if actions is not None:
                        assert ep.actions["given"][t - 1, k] == (a in actions)
                        if a in actions:
                            assert ep.actions["actions"][a][t - 1] == actions[a]
            # Per agent: its rows are the steps that returned its observation.
            for a in agents:
                view = ep.agents[a]
                expect = [t for t, s in enumerate(steps) if a in s[1]]
                assert view.rows.tolist() == expect
                assert view.total_reward == pytest.approx(sum(s[2].get(a, 0.0) for s in steps))
                assert view.acted.tolist() == [t + 1 < len(steps) and a in steps[t + 1][0]
                                               for t in expect]


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
            (lambda m: m.pop("multiagent"), "must have a 'multiagent'"),
            (lambda m: m["multiagent"].__setitem__("api", "turns"), "api must be one of"),
            (lambda m: m["multiagent"].__setitem__("agents", ["a", "a"]), "distinct strings"),
            (lambda m: m["multiagent"].__setitem__("agents", ["x", "y"]), "not the agents"),
            (lambda m: m["multiagent"].__setitem__("agents", ["player_1"]), "shape \\[1\\]")]:
        doc = json.loads(json.dumps(good))
        change(doc)
        path.write_text(json.dumps(doc))
        with pytest.raises(FormatError, match=match):
            RecordingReader(tmp_path)


def test_transitions_of_one_agent_and_of_all(tmp_path):
    from gym_recorder.errors import UnsupportedSpaceError
    from gym_recorder.training.transitions import transitions

    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path / "t")
    games = play_aec(env, seed=7, episodes=4)
    env.close()
    with RecordingReader(tmp_path / "t") as reader:
        t = transitions(reader, agent="player_2")
        # Expected: from each turn where player_2 acted to its next turn.
        obs, nxt, act, rew, term = [], [], [], [], []
        for seen in games:
            rows = seen["player_2"]
            for a, b in zip(rows, rows[1:]):
                if a[5] is not None:
                    obs.append(a[0]["observation"])
                    nxt.append(b[0]["observation"])
                    act.append(a[5])
                    rew.append(b[1])
                    term.append(b[2])
        np.testing.assert_array_equal(t.obs["observation"], np.array(obs))
        np.testing.assert_array_equal(t.next_obs["observation"], np.array(nxt))
        np.testing.assert_array_equal(t.action, np.array(act))
        np.testing.assert_array_equal(t.reward, np.array(rew))
        np.testing.assert_array_equal(t.terminated, np.array(term))
        assert (t.agent == 1).all() and t.terminated.sum() == len(games)
        both = transitions(reader)
        assert sorted(set(both.agent.tolist())) == [0, 1]
        assert len(both) == len(t) + len(transitions(reader, agent="player_1"))
        batch = both.sample(5, np.random.default_rng(0))
        assert batch["agent"].shape == (5,)
        with pytest.raises(KeyError, match="player_1"):
            transitions(reader, agent="player_3")
    env = RecordingParallelWrapper(kaz.parallel_env(max_cycles=200, spawn_delay=3),
                                   tmp_path / "k")
    runs = play_parallel(env, seed=4)
    env.close()
    with RecordingReader(tmp_path / "k") as reader:
        t = transitions(reader, agent="knight_0")
        steps = runs[0]
        expect = [t_ for t_ in range(len(steps) - 1) if "knight_0" in steps[t_ + 1][0]]
        assert t.step.tolist() == expect
        np.testing.assert_array_equal(
            t.next_obs, np.array([steps[s + 1][1]["knight_0"] for s in expect]))
        np.testing.assert_array_equal(
            t.reward, np.array([steps[s + 1][2]["knight_0"] for s in expect]))
        assert t.terminated[-1] and not t.terminated[:-1].any()
        assert len(transitions(reader)) > len(t)  # (all four agents have the same spaces)
    import gymnasium as gym

    from gym_recorder import RecordingWrapper

    with RecordingWrapper(gym.make("CartPole-v1"), tmp_path / "s") as single:
        single.reset(seed=0)
        single.step(0)
    with RecordingReader(tmp_path / "s") as reader:
        with pytest.raises(UnsupportedSpaceError, match="single-agent"):
            transitions(reader, agent="a")


@pytest.mark.parametrize("api, entry, kwargs, override", [
    ("aec", "pettingzoo.classic.connect_four_v3:env", {}, None),
    ("parallel", "pettingzoo.butterfly.knights_archers_zombies_v11:parallel_env",
     {"max_cycles": 200, "spawn_delay": 3}, {"spawn_delay": 4}),
    ("parallel", "pettingzoo.sisl.pursuit_v5:parallel_env", {"max_cycles": 25},
     {"n_evaders": 10})])
def test_replay_compares_every_agent_exactly(tmp_path, api, entry, kwargs, override):
    from gym_recorder.replay.multiagent import make_multiagent_env
    from gym_recorder.replay.run import replay_recording

    env = make_multiagent_env(entry, kwargs)
    wrapper = RecordingAECWrapper if api == "aec" else RecordingParallelWrapper
    env = wrapper(env, tmp_path, entry_point=entry, env_kwargs=kwargs)
    if api == "aec":
        play_aec(env, seed=11, episodes=2)
    else:
        play_parallel(env, seed=4, episodes=2)
    env.close()
    checks = list(replay_recording(tmp_path))
    assert [c.status for c in checks] == ["match", "match"], [c.message for c in checks]
    if override is not None:  # another env: found, with the row and agent that differ
        checks = list(replay_recording(tmp_path, env_kwargs=override))
        assert checks[0].status == "mismatch" and checks[0].step is not None
        assert "'" in checks[0].message  # names the agent


def test_replay_without_an_entry_point_is_skipped_with_the_reason(tmp_path):
    from gym_recorder.replay.run import replay_recording

    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path)
    play_aec(env, seed=0)
    env.close()
    (check,) = replay_recording(tmp_path)
    assert check.status == "skipped" and "entry point" in check.message


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


def test_cli_records_replays_and_summarises_pettingzoo_envs(tmp_path, capsys):
    from gym_recorder import cli

    d = tmp_path / "ttt"
    assert cli.main(["record", "pettingzoo.classic.tictactoe_v3:env", "-d", str(d),
                     "--episodes", "4", "--seed", "3", "-q"]) == 0
    with RecordingReader(d) as reader:
        assert len(reader) == 4 and reader[0].seed == 3
        for ep in reader:  # the random policy keeps to the action masks: no illegal move
            for name, view in ep.agents.items():
                acted = view.acted
                masks = view.observations["action_mask"][acted]
                moves = view.actions[acted]
                assert masks[np.arange(len(moves)), moves].all()
    assert cli.main(["replay", str(d)]) == 0
    assert "4 episodes replayed: 4 match" in capsys.readouterr().out
    assert cli.main(["info", str(d)]) == 0
    out = capsys.readouterr().out
    assert "agents             2 (aec)" in out and "player_1" in out
    assert cli.main(["info", str(d), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    returns = doc["multiagent"]["returns"]
    assert set(returns) == {"player_1", "player_2"}
    with RecordingReader(d) as reader:
        totals = [ep.agents["player_1"].total_reward for ep in reader]
    assert returns["player_1"]["mean"] == pytest.approx(np.mean(totals))
    p = tmp_path / "kaz"
    assert cli.main(["record", "pettingzoo.butterfly.knights_archers_zombies_v11:parallel_env",
                     "-d", str(p), "--steps", "30", "--seed", "0", "-q", "--env-kwargs",
                     '{"max_cycles": 20}']) == 0
    assert cli.main(["replay", str(p), "-q"]) == 0


def test_parquet_export_has_an_agent_column_and_the_agents_spaces(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    from gym_recorder.integrations.parquet import export_parquet
    from gym_recorder.training.transitions import transitions

    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path / "t")
    play_aec(env, seed=1, episodes=3)
    env.close()
    result = export_parquet(tmp_path / "t", tmp_path / "out")
    table = pq.read_table(tmp_path / "out" / "data")
    with RecordingReader(tmp_path / "t") as reader:
        t = transitions(reader)
    assert result["steps"] == table.num_rows == len(t)
    np.testing.assert_array_equal(table.column("agent").to_numpy(), t.agent)
    np.testing.assert_array_equal(table.column("reward").to_numpy(), t.reward)
    np.testing.assert_array_equal(
        np.stack(table.column("obs.action_mask").to_numpy(zero_copy_only=False)),
        t.obs["action_mask"])
    meta = json.loads((tmp_path / "out" / "gym_recorder.json").read_text())
    assert meta["multiagent"] == {"api": "aec", "agents": ["player_1", "player_2"], "agent": None}
    assert meta["action_space"]["type"] == "Discrete" and meta["action_space"]["n"] == 9
    from gym_recorder import cli

    assert cli.main(["export", str(tmp_path / "t"), "-f", "parquet", "-o", str(tmp_path / "p1"),
                     "--agent", "player_1", "-q"]) == 0
    table = pq.read_table(tmp_path / "p1" / "data")
    with RecordingReader(tmp_path / "t") as reader:
        t1 = transitions(reader, agent="player_1")
    assert table.num_rows == len(t1) and set(table.column("agent").to_numpy()) == {0}
    np.testing.assert_array_equal(table.column("action").to_numpy(), t1.action)


def test_minari_export_refuses_a_multiagent_recording_by_name(tmp_path, monkeypatch):
    pytest.importorskip("minari")
    from gym_recorder.integrations.minari_io import export_minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path / "t")
    play_aec(env, seed=1)
    env.close()
    with pytest.raises(FormatError, match="Minari export does not support multi-agent"):
        export_minari(tmp_path / "t", "gr/ttt-v0")
    assert not (tmp_path / "minari").exists() or not any((tmp_path / "minari").rglob("*.json"))


def test_the_datasets_refuse_a_multiagent_recording_by_name(tmp_path):
    from gym_recorder.training.datasets import EpisodeDataset, TransitionDataset

    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path)
    play_aec(env, seed=1)
    env.close()
    for cls in (TransitionDataset, EpisodeDataset):
        with pytest.raises(FormatError, match=f"{cls.__name__} .* does not support multi-agent"):
            cls(tmp_path)


def test_replay_with_a_given_env_function(tmp_path):
    supersuit = pytest.importorskip("supersuit")
    from gym_recorder.replay.multiagent import MultiAgentStreams

    def make(ma=None):
        return supersuit.black_death_v3(kaz.parallel_env(max_cycles=60, spawn_delay=3))

    env = RecordingParallelWrapper(make(), tmp_path)
    play_parallel(env, seed=4, episodes=2)
    env.close()
    streams = MultiAgentStreams(env_fn=make)
    with RecordingReader(tmp_path) as reader:
        checks = [streams.check(ep) for ep in reader]
    streams.close()
    assert [c.status for c in checks] == ["match", "match"], [c.message for c in checks]
    other = MultiAgentStreams(env_fn=lambda ma: kaz.parallel_env(max_cycles=60, spawn_delay=3))
    with RecordingReader(tmp_path) as reader:
        check = other.check(reader[0])  # without black_death: another env, found
    other.close()
    assert check.status == "mismatch" and check.step is not None and check.message


def test_a_hostile_agent_selection_is_refused_by_name(tmp_path):
    env = RecordingAECWrapper(tictactoe_v3.env(), tmp_path)
    play_aec(env, seed=1)
    env.close()
    man = json.loads(next(tmp_path.glob("*.manifest.json")).read_text())
    batch = json.loads((tmp_path / man["batches"][0]["fn"]).read_text())
    ref = batch["episodes"][0]["observations"]["agent_selection"]
    with open(tmp_path / ref["npyfile"], "r+b") as f:  # (the CRC-32 is checked with verify)
        f.seek(ref["npyoff"])
        f.write(np.int64(7).tobytes())
    with RecordingReader(tmp_path) as reader:
        ep = reader[0]
        with pytest.raises(FormatError, match=r"agent_selection outside \[-1, 2\)"):
            ep.agents
    from gym_recorder.replay.multiagent import MultiAgentStreams
    from gym_recorder.training.transitions import transitions

    with RecordingReader(tmp_path) as reader:
        with pytest.raises(FormatError, match="agent_selection outside"):
            transitions(reader, agent="player_1")
        streams = MultiAgentStreams(env_fn=lambda ma: tictactoe_v3.env())
        with pytest.raises(FormatError, match="agent_selection outside"):
            streams.check(reader[0])
        streams.close()


def test_aec_rows_are_exact_however_the_user_observes(tmp_path):
    """The recorder keeps the observation the user's last() got, and observes itself when
    nobody did."""
    bare = tictactoe_v3.env()
    bare.reset(seed=0)
    moves, seen = [], []  # a whole game of first legal moves, and what each turn observed
    for agent in bare.agent_iter():
        obs, _, term, trunc, _ = bare.last()
        seen.append((agent, _copy(obs)))
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


def test_npz_export_holds_the_joint_rows_and_the_agents(tmp_path):
    from gym_recorder.integrations.export import export_npz

    env = RecordingParallelWrapper(pursuit_v5.parallel_env(max_cycles=10), tmp_path / "p")
    play_parallel(env, seed=0, episodes=2)
    env.close()
    export_npz(tmp_path / "p", tmp_path / "p.npz")
    z = np.load(tmp_path / "p.npz")
    with RecordingReader(tmp_path / "p") as reader:
        agents = list(reader[0].multiagent.agents)
        np.testing.assert_array_equal(
            z["observations/observations/pursuer_3"],
            np.concatenate([ep.observations["observations"]["pursuer_3"] for ep in reader]))
    assert z["agents"].tolist() == agents
    assert z["observations/rewards"].shape == (22, len(agents))


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


class JoiningEnv(ParallelEnv):
    """A small ParallelEnv: "late" joins at step 2, "early" leaves after step 3, every dict
    carries an extra "common" key, and the two agents' spaces differ."""

    metadata = {"name": "joining_v0"}
    possible_agents = ["early", "late"]

    def __init__(self):
        self._spaces = {"early": gym_spaces.Box(-1, 1, (2,), np.float32),
                        "late": gym_spaces.Discrete(5)}

    def observation_space(self, agent):
        return self._spaces[agent]

    def action_space(self, agent):
        return gym_spaces.Discrete(3)

    def _obs(self):
        out = {a: (np.full(2, self.t / 10, np.float32) if a == "early" else self.t)
               for a in self.agents}
        out["common"] = np.array([self.t])
        return out

    def reset(self, seed=None, options=None):
        self.t = 0
        self.agents = ["early"]
        return self._obs(), {"early": {"t": 0}, "common": {"note": "start"}}

    def step(self, actions):
        self.t += 1
        if self.t == 2:
            self.agents = self.agents + ["late"]
        obs = self._obs()
        rewards = {a: float(self.t) for a in self.agents}
        terms = {a: a == "early" and self.t == 3 for a in self.agents}
        truncs = {a: self.t == 5 for a in self.agents}
        infos = {a: {"t": self.t} for a in self.agents}
        rewards["common"] = 0.5
        self.agents = [a for a in self.agents if not (terms[a] or truncs[a])]
        return obs, rewards, terms, truncs, infos


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
    steps = [(None, _copy(obs))]
    while rec.agents:
        actions = {a: rec.action_space(a).sample() for a in rec.agents
                   if env._rng.random() < 0.8}
        obs, *_ = rec.step(actions)
        steps.append((actions, _copy(obs)))
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


def test_replay_of_an_env_with_joining_agents_and_extra_keys(tmp_path):
    from gym_recorder.replay.multiagent import MultiAgentStreams

    env = RecordingParallelWrapper(JoiningEnv(), tmp_path)
    play_parallel(env, seed=0, episodes=2)
    env.close()
    streams = MultiAgentStreams(env_fn=lambda ma: JoiningEnv())
    with RecordingReader(tmp_path) as reader:
        checks = [streams.check(ep) for ep in reader]
    streams.close()
    assert [c.status for c in checks] == ["match", "match"], [c.message for c in checks]
