"""Making the env and loading the policy a command line names (gym_recorder.replay.make):
policies from a module or a file, dotted attributes, registered and ``module:EnvId`` ids, and a
ReplayError that names the id or the policy for each way it can fail."""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder.errors import ReplayError
from gym_recorder.format.envspec import USER_MODULES
from gym_recorder.replay.make import load_policy, make_env

POLICY = """
import numpy as np

class Agent:
    @staticmethod
    def act(obs):
        return int(3 * obs[2] + obs[3] > 0)  # push towards the pole's lean

def zeros(obs):
    return 0

not_callable = 3
"""


def test_a_policy_from_a_file_drives_a_made_env(tmp_path):
    (tmp_path / "my_policy.py").write_text(POLICY)
    act = load_policy(f"{tmp_path / 'my_policy.py'}:Agent.act")
    env = make_env("CartPole-v1", max_episode_steps=50)
    obs, _ = env.reset(seed=0)
    steps, done = 0, False
    while not done:
        action = act(obs)
        assert action == int(3 * obs[2] + obs[3] > 0)
        obs, _, terminated, truncated, _ = env.step(action)
        steps, done = steps + 1, terminated or truncated
    assert steps == 50  # (the lean-following policy keeps the pole up: the time limit ends it)
    assert env.spec.max_episode_steps == 50
    env.close()


def test_a_policy_from_a_module_on_the_current_directory(tmp_path, monkeypatch):
    (tmp_path / "cwd_policy_mod.py").write_text(POLICY)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        assert load_policy("cwd_policy_mod:zeros")(np.zeros(4)) == 0
    finally:
        sys.modules.pop("cwd_policy_mod", None)


@pytest.mark.parametrize("spec, message", [
    ("no_colon", "must look like 'module:callable'"),
    ("missing_file.py:act", "policy file 'missing_file.py' does not exist"),
    ("no_such_module_xyz:act", "cannot import policy module 'no_such_module_xyz': "
                               "ModuleNotFoundError"),
    ("{file}:nothing", "has no 'nothing'"),
    ("{file}:not_callable", "is not callable"),
])
def test_each_bad_policy_is_named(tmp_path, spec, message):
    (tmp_path / "p.py").write_text(POLICY)
    with pytest.raises(ReplayError, match=message.replace("(", r"\(")):
        load_policy(spec.format(file=tmp_path / "p.py"))


def test_a_vector_env_and_kwargs():
    env = make_env("CartPole-v1", {"sutton_barto_reward": True}, num_envs=3)
    assert isinstance(env, gym.vector.SyncVectorEnv) and env.num_envs == 3
    obs, _ = env.reset(seed=1)
    assert obs.shape == (3, 4)
    _, reward, *_ = env.step(np.zeros(3, dtype=np.int64))
    assert reward.tolist() == [0.0, 0.0, 0.0]  # (Sutton and Barto's reward: 0 while up)
    env.close()


def test_an_unknown_id_names_the_id_and_the_import_hint():
    with pytest.raises(ReplayError, match=r"cannot make env 'NoSuchEnv-v0': .*--import PACKAGE"):
        make_env("NoSuchEnv-v0")
    with pytest.raises(ReplayError, match=r"cannot make env 'CartPole-v1': .*no_such_kwarg"):
        make_env("CartPole-v1", {"no_such_kwarg": 1})


def test_a_module_env_id_is_kept_for_replay():
    before = list(USER_MODULES)
    env = make_env("sample_envs:sample_envs/Text-v0")
    try:
        assert "sample_envs" in USER_MODULES  # (recordings made now name it, for replay)
    finally:
        env.close()
        USER_MODULES[:] = before  # (other tests' recordings name no imports)
