"""A process forked while a RecordingWrapper exists exits normally and records on its own (10.9).

The forking runs in a fresh interpreter (a script), so that its children leave through normal
interpreter shutdown (at-exit handlers included), as a user's program does.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

ROOT = Path(__file__).resolve().parent.parent

def test_fork_child_exits_records_on_its_own_and_nothing_twice(tmp_path):
    script = tmp_path / "fork_script.py"
    script.write_text(textwrap.dedent('''
        import os, sys, time
        import gymnasium as gym
        import numpy as np
        from gym_recorder import RecordingWrapper

        def run(env, seed, steps):
            obs, _ = env.reset(seed=seed)
            out, actions = [obs.copy()], []
            for t in range(steps):
                obs, _, term, trunc, _ = env.step(t % 2)
                out.append(obs.copy())
                actions.append(t % 2)
                if term or trunc:
                    break
            return np.stack(out), np.array(actions)

        def wait(pid):
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    return os.waitstatus_to_exitcode(status)
                time.sleep(0.05)
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            sys.exit("a child hung")

        d = sys.argv[1]
        env = RecordingWrapper(gym.make("CartPole-v1"), d, flush_interval=None)
        env.reset(seed=1)
        env.step(0)
        env.flush()            # the writer thread is alive and has written a batch
        env.step(1)            # buffered, not written, when the children are forked
        parent = env.file_prefix
        pid = os.fork()
        if pid == 0:
            sys.exit(0)        # never touches the wrapper; normal exit, at-exit handlers run
        if wait(pid) != 0:
            sys.exit("the idle child failed")
        pid = os.fork()
        if pid == 0:
            obs, actions = run(env, 11, 30)
            np.save(os.path.join(d, "child_obs.npy"), obs)
            np.save(os.path.join(d, "child_act.npy"), actions)
            if env.file_prefix == parent:
                sys.exit("the child reuses the parent's prefix")
            env.close()
            sys.exit(0)        # normal exit again
        if wait(pid) != 0:
            sys.exit("the recording child failed")
        env.step(0)
        env.close()            # the parent's episode: reset(seed=1), then 3 steps
    '''))
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "rec")], cwd=ROOT,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=180,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    d = tmp_path / "rec"
    child_obs = np.load(d / "child_obs.npy")
    child_act = np.load(d / "child_act.npy")
    env = gym.make("CartPole-v1")
    expect = [env.reset(seed=1)[0]] + [env.step(a)[0] for a in (0, 1, 0)]
    with RecordingReader(d) as reader:
        eps = list(reader)
        assert len(reader.writers) == 2
        assert all(w["complete"] for w in reader.writers)
    assert sorted(ep.seed for ep in eps) == [1, 11]  # every episode once
    by_seed = {ep.seed: ep for ep in eps}
    assert np.array_equal(by_seed[1].observations, np.stack(expect))
    assert np.array_equal(by_seed[1].actions, np.array([0, 1, 0]))
    assert np.array_equal(by_seed[11].observations, child_obs)
    assert np.array_equal(by_seed[11].actions, child_act)


_INHERITED = None


def _pool_task(seed):
    """Runs in a pool worker forked while _INHERITED (a recording wrapper) existed."""
    env = _INHERITED
    obs = [env.reset(seed=seed)[0]]
    for t in range(5):
        obs.append(env.step(t % 2)[0])
    prefix = env.file_prefix
    env.close()  # must not hang: the worker has its own writer
    return prefix, np.stack(obs)


def test_a_pool_worker_records_with_an_inherited_wrapper(tmp_path):
    import multiprocessing

    from gym_recorder import RecordingWrapper

    global _INHERITED
    _INHERITED = env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path)
    env.reset(seed=1)
    env.step(0)  # buffered in the parent when the worker is forked
    with multiprocessing.get_context("fork").Pool(1) as pool:
        prefix, child_obs = pool.apply_async(_pool_task, (21,)).get(timeout=120)
    env.step(1)
    env.close()
    _INHERITED = None
    assert prefix != env.file_prefix
    with RecordingReader(tmp_path) as reader:
        eps = {ep.seed: ep for ep in reader}
        assert len(reader) == 2
    assert np.array_equal(eps[21].observations, child_obs)
    assert np.array_equal(eps[1].actions, np.array([0, 1]))
