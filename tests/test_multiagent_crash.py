"""A PettingZoo recording killed with SIGKILL mid-run: what was committed reads back, checks
out (verify), and replays exactly; repair leaves it as it is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("pettingzoo")

from gym_recorder import RecordingReader  # noqa: E402
from gym_recorder.integrity import verify  # noqa: E402
from gym_recorder.integrity._repair import repair  # noqa: E402
from gym_recorder.replay.run import replay_recording  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ENTRY = "pettingzoo.butterfly.knights_archers_zombies_v11:parallel_env"
KWARGS = {"max_cycles": 60, "spawn_delay": 3}

CHILD = f"""
import sys
from gym_recorder.record.multiagent import RecordingParallelWrapper
from gym_recorder.replay.multiagent import make_multiagent_env
env = RecordingParallelWrapper(make_multiagent_env({ENTRY!r}, {KWARGS!r}), sys.argv[1],
                               entry_point={ENTRY!r}, env_kwargs={KWARGS!r},
                               target_batch_bytes=30_000, flush_interval=0.2)
print("ready", flush=True)
for ep in range(10**9):
    env.reset(seed=ep)
    for a in env.possible_agents:
        env.action_space(a).seed(ep)
    while env.agents:
        env.step({{a: env.action_space(a).sample() for a in env.agents}})
        print("step", flush=True)
"""


@pytest.mark.stress
def test_killed_while_recording_keeps_what_it_committed(tmp_path):
    env = dict(os.environ, SDL_VIDEODRIVER="dummy",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout.readline() == b"ready\n", child.stderr.read().decode()
    time.sleep(2.0)
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate()
    assert child.returncode == -signal.SIGKILL
    taken = out.count(b"step") + 0
    with RecordingReader(tmp_path, verify=True) as reader:
        episodes = list(reader)
        rows = sum(len(ep) for ep in episodes)
        assert episodes and 0 < rows <= taken
        assert all(ep.end == "truncated" or ep.end == "terminated" for ep in episodes[:-1])
        assert episodes[-1].end in (None, "truncated", "terminated")
        for ep in episodes:
            assert set(ep.agents) == {"archer_0", "archer_1", "knight_0", "knight_1"}
    assert verify(tmp_path) == []
    checks = list(replay_recording(tmp_path))
    assert [c.status for c in checks] == ["match"] * len(episodes), [c.message for c in checks]
    repair(tmp_path)
    with RecordingReader(tmp_path) as reader:
        assert sum(len(ep) for ep in reader) >= rows  # (repair may take back uncommitted batches)
