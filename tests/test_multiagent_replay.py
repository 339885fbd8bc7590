"""Replaying multi-agent recordings exactly, and the command line's record/replay/info."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

from multiagent_helpers import JoiningEnv, play_aec, play_parallel  # noqa: E402
from pettingzoo.butterfly import knights_archers_zombies_v11 as kaz  # noqa: E402
from pettingzoo.classic import tictactoe_v3  # noqa: E402

from gym_recorder import RecordingReader  # noqa: E402
from gym_recorder.record.multiagent import (RecordingAECWrapper,  # noqa: E402
                                            RecordingParallelWrapper)


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
