"""Reading multi-agent recordings: one agent's transitions, exports, and what is refused."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from multiagent_helpers import play_aec, play_parallel  # noqa: E402
from pettingzoo.butterfly import knights_archers_zombies_v11 as kaz  # noqa: E402
from pettingzoo.classic import tictactoe_v3  # noqa: E402
from pettingzoo.sisl import pursuit_v5  # noqa: E402

from gym_recorder.errors import FormatError  # noqa: E402
from gym_recorder import RecordingReader  # noqa: E402
from gym_recorder.record.multiagent import (RecordingAECWrapper,  # noqa: E402
                                            RecordingParallelWrapper)


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
