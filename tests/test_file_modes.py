"""Files of a recording get the permissions the umask gives, as any file open() makes.

tempfile.mkstemp (under atomicwrites) makes files only their owner can read; renamed into place,
a recording was unreadable to a training job, a viewer or a teammate running as another user.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingVectorWrapper, RecordingWrapper
from gym_recorder.integrity import REPAIR_FOLDER_PREFIX, repair


def _modes(directory: Path) -> dict[str, int]:
    """Permission bits of every regular file under ``directory``, by relative path."""
    out = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            out[os.path.relpath(path, directory)] = stat.S_IMODE(os.stat(path).st_mode)
    return out


@pytest.fixture(params=[0o022, 0o002, 0o077])
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


@pytest.mark.parametrize("fsync", [False, True])
def test_recorded_files_have_the_umask_permissions(tmp_path, umask, fsync):
    env = RecordingWrapper(gym.make("CartPole-v1"), tmp_path / "rec", target_batch_bytes=2_000,
                           fsync=fsync)
    env.reset(seed=0)
    env.action_space.seed(0)
    steps = 0
    while steps < 300:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            env.reset()
    env.flush()  # the manifest is rewritten again at close: both paths
    env.close()
    modes = _modes(tmp_path / "rec")
    assert len(modes) >= 5  # a manifest and at least two batches of two files
    assert set(modes.values()) == {0o666 & ~umask}, modes
    with RecordingReader(tmp_path / "rec") as reader:
        assert sum(len(ep.rewards) for ep in reader) == 300


def test_vector_recording_and_repair_outputs_have_the_umask_permissions(tmp_path, umask):
    rec = tmp_path / "rec"
    env = RecordingVectorWrapper(gym.make_vec("CartPole-v1", num_envs=2,
                                              vectorization_mode="sync"), rec,
                                 target_batch_bytes=2_000)
    env.reset(seed=0)
    for _ in range(200):
        env.step(np.array([0, 1]))
    env.close()
    assert set(_modes(rec).values()) == {0o666 & ~umask}
    # Damage one batch's JSON: repair rewrites the manifest and copies files aside.
    name = sorted(n for n in os.listdir(rec) if n.endswith(".json") and ".ep" in n)[1]
    (rec / name).write_bytes((rec / name).read_bytes()[:-10])
    actions = repair(rec)
    assert actions, "repair found nothing to do"
    modes = _modes(rec)
    assert any(p.startswith(REPAIR_FOLDER_PREFIX) for p in modes), modes
    # The damaged file was moved aside as it was (the mode it had); everything repair wrote
    # has the umask's.
    assert set(modes.values()) == {0o666 & ~umask}, modes
    with RecordingReader(rec, verify=True) as reader:
        assert len(reader) > 0
