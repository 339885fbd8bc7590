"""Helpers of the multi-agent tests: play PettingZoo envs keeping what they returned, check a
recording against it, and a small Parallel env whose agents join and leave."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium import spaces as gym_spaces
from pettingzoo import ParallelEnv

from gym_recorder import RecordingReader


def copy_obs(x):
    if isinstance(x, dict):
        return {k: copy_obs(v) for k, v in x.items()}
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
            seen[agent].append((copy_obs(obs), reward, term, trunc, copy_obs(info), action))
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


def play_parallel(env, seed, episodes=1):
    runs = []
    for e in range(episodes):
        obs, infos = env.reset(seed=seed + e)
        for a in env.possible_agents:
            env.action_space(a).seed(seed + e)
        steps = [(None, copy_obs(obs), {}, {}, {}, copy_obs(infos), list(env.agents))]
        while env.agents:
            actions = {a: env.action_space(a).sample() for a in env.agents}
            result = env.step(actions)
            steps.append((actions, *(copy_obs(r) for r in result), list(env.agents)))
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
