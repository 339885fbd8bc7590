"""Ray's datasets of an edited recording: the deleted episodes are not in them."""

from __future__ import annotations

import pytest

from gym_recorder import RecordingReader, edit
from test_ray import ENVS, _ray_mod, assert_episodes_equal, assert_steps_equal, record

pytestmark = pytest.mark.usefixtures("ray_cluster")


def test_ray_datasets_leave_deleted_episodes_out(tmp_path):
    gr_ray = _ray_mod()
    make, _, target = ENVS["image"]  # episodes in parts across batches (and read tasks)
    d = tmp_path / "rec"
    record(make(), d, 6, 0, target=target)
    edit.delete(d, [1, 4])
    with RecordingReader(d) as reader:
        assert len(reader) == 4
        steps = assert_steps_equal(gr_ray.read_recording(d), reader)
        assert steps == sum(len(ep) for ep in reader)
        assert_episodes_equal(gr_ray.read_recording(d, granularity="episode"), reader)

