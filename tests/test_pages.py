"""gym_recorder.read.pages: large arrays handed out on recycled pages, and the reader's episodes
built on them (an episode held by the caller is never written into again)."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from gym_recorder import RecordingReader, RecordingWrapper
from gym_recorder.read.pages import KEEP_BLOCKS, PAGES, RECYCLE_BYTES, PageRecycler

from needs import need_module

BIG = (RECYCLE_BYTES // 1000 + 1, 1000)  # just above the recycling threshold, as uint8


def address(a: np.ndarray) -> int:
    return int(a.__array_interface__["data"][0])


def test_a_small_array_is_numpys_own() -> None:
    a = PageRecycler().empty((10, 10), np.dtype(np.float32))
    assert a.flags.owndata and a.shape == (10, 10) and a.dtype == np.float32


def test_a_block_comes_back_once_every_view_is_gone() -> None:
    pages = PageRecycler()
    a = pages.empty(BIG, np.dtype(np.uint8))
    assert not a.flags.owndata and a.flags.writeable and a.flags.c_contiguous
    first = address(a)
    a[:] = 7
    view = a[1:]
    del a
    b = pages.empty(BIG, np.dtype(np.uint8))  # the view still uses the first block
    assert address(b) != first
    b[:] = 9
    assert (view == 7).all()
    del view
    c = pages.empty(BIG, np.dtype(np.uint8))  # now free again: the same pages
    assert address(c) == first
    assert (b == 9).all()


def test_a_block_is_reused_only_for_an_array_it_fits_closely() -> None:
    pages = PageRecycler()
    a = pages.empty((64 << 20,), np.dtype(np.uint8))
    first = address(a)
    del a
    small = pages.empty(BIG, np.dtype(np.uint8))  # 4 MB does not take a 64 MB block
    assert address(small) != first
    again = pages.empty((60 << 20,), np.dtype(np.uint8))
    assert address(again) == first


def test_free_blocks_are_bounded_and_released() -> None:
    pages = PageRecycler()
    arrays = [pages.empty(BIG, np.dtype(np.uint8)) for _ in range(KEEP_BLOCKS + 2)]
    del arrays
    assert len(pages._free) == KEEP_BLOCKS
    pages.release()
    assert pages._free == []
    a = pages.empty(BIG, np.dtype(np.float64))  # still usable after a release
    a[:] = 1.5
    assert a.sum() == 1.5 * a.size


def test_other_dtypes_and_shapes() -> None:
    pages = PageRecycler()
    a = pages.empty((700, 84, 84, 3), np.dtype(np.uint8))
    b = pages.empty((600_000, 4), np.dtype("<f4"))
    a[...] = np.arange(84, dtype=np.uint8)[None, None, :, None]
    b[...] = 0.25
    assert a.shape == (700, 84, 84, 3) and b.dtype == np.float32 and b.sum() == 600_000
    assert int(a[5, 3, 80, 1]) == 80


@pytest.mark.stress
def test_a_forked_child_uses_its_own_blocks() -> None:
    pages = PageRecycler()
    a = pages.empty(BIG, np.dtype(np.uint8))
    a[:] = 3
    del a
    assert len(pages._free) == 1
    pid = os.fork()
    if pid == 0:  # the child: the parent's free list is not its own
        code = 0
        try:
            b = pages.empty(BIG, np.dtype(np.uint8))
            b[:] = 4
            code = 0 if len(pages._free) == 0 and (b == 4).all() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert len(pages._free) == 1  # the parent's block is still there for it


def _pong(directory: str, episodes: int, steps: int) -> list[np.ndarray]:
    """Records raw Pong frames into batches of about 1 MB, so that each episode of ``steps``
    steps (100 KB a frame) is read from several parts into recycled pages; returns each
    episode's frames as recorded."""
    ale_py = need_module("ale_py", "pip install ale-py")
    gym.register_envs(ale_py)
    env = RecordingWrapper(gym.make("ALE/Pong-v5", frameskip=4, repeat_action_probability=0.0),
                           directory, target_batch_bytes=1 << 20)
    frames = []
    for e in range(episodes):
        obs, _ = env.reset(seed=e)
        seen = [obs]
        for t in range(steps):
            obs, *_ = env.step((t + e) % 6)
            seen.append(obs)
        frames.append(np.stack(seen))
    env.close()
    return frames


def test_iterating_pong_hands_out_episodes_that_stay_as_read(tmp_path) -> None:
    expected = _pong(str(tmp_path), 4, 60)
    assert expected[0].nbytes >= RECYCLE_BYTES  # (on recycled pages, read from several parts)
    for _ in range(2):  # (the second pass reuses the first one's blocks)
        held = []
        with RecordingReader(tmp_path) as reader:
            for ep, frames in zip(reader, expected):
                assert not ep.observations.flags.owndata
                np.testing.assert_array_equal(ep.observations, frames)
                held.append(ep)
            # Every episode kept by the caller is still what was recorded: no later episode
            # was read into its pages.
            for ep, frames in zip(held, expected):
                np.testing.assert_array_equal(ep.observations, frames)
        only_frames = [ep.observations for ep in held]
        del held, ep
        with RecordingReader(tmp_path) as reader:  # blocks dropped while views live on
            for ep, frames in zip(reader, reversed(expected)):
                pass
        for obs, frames in zip(only_frames, expected):
            np.testing.assert_array_equal(obs, frames)


def test_a_column_on_recycled_pages(tmp_path) -> None:
    expected = _pong(str(tmp_path), 2, 40)
    with RecordingReader(tmp_path) as reader:
        col = reader.column("observations")
        again = reader.column("observations")
    want = np.concatenate(expected)
    np.testing.assert_array_equal(col, want)
    np.testing.assert_array_equal(again, want)
    assert address(col) != address(again)


def test_the_process_recycler_is_the_readers() -> None:
    from gym_recorder.read.decode import Decoder
    from gym_recorder.read.storage import LocalStorage
    assert Decoder(LocalStorage(os.getcwd())).pages is PAGES
