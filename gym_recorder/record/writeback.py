"""The writer's choices about the page cache and the thread, measured by benchmarks/bench_ale.py.

``WRITEBACK`` (what a .bin leaves in the page cache) and ``WRITE_MODE`` (which thread writes) are
read when a :class:`~gym_recorder.record.writer.BatchWriter` starts; see docs/recorder-policies.md.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = ["WRITEBACK_POLICIES", "DEFAULT_WRITEBACK", "WRITE_MODES", "DEFAULT_WRITE_MODE",
           "Writeback"]

# What the writer does with the page cache a .bin leaves behind (see Writeback):
# "keep": nothing (written back by the kernel when it likes, fsynced at flush and close);
# "sync-drop": fdatasync the .bin, then drop its pages (POSIX_FADV_DONTNEED), in the writer thread;
# "lazy-drop": ask for writeback as soon as the .bin is written (DONTNEED starts it without
#     waiting), and drop the previous .bin's pages (clean by then) when the next one is written.
# "lazy-drop" is the default: measured on 210x160x3 frames, the writes cost 45-49 us of CPU a step
# against 71-80 with "keep" (pages freed by DONTNEED are reused instead of new ones allocated),
# the worst batch 22-28 ms against 48-101, and on ALE the added time and its spread were the lowest
# (see docs/recorder-policies.md and benchmarks/bench_ale.py --variants).
WRITEBACK_POLICIES = ("keep", "sync-drop", "lazy-drop")
DEFAULT_WRITEBACK = "lazy-drop"
# Where batches are written: "thread" (a background thread; the stepping thread only hands the
# batch over) or "inline" (in the thread that submits it, as the seed's design did: no Python
# runs beside the env, which matters for envs that hold the GIL while they step, like ALE).
WRITE_MODES = ("thread", "inline")
DEFAULT_WRITE_MODE = "thread"


def _drop_pages(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


class Writeback:
    """Bounds the page cache a writer leaves dirty (policy: one of WRITEBACK_POLICIES)."""

    def __init__(self, policy: str) -> None:
        if policy not in WRITEBACK_POLICIES:
            raise ValueError(f"writeback policy must be one of {WRITEBACK_POLICIES}, got {policy!r}")
        self.policy = policy
        self._previous: str | None = None

    def written(self, f: Any) -> None:
        """Called with a .bin's open temporary file once its bytes are written."""
        if self.policy == "keep":
            return
        f.flush()
        if self.policy == "sync-drop":
            getattr(os, "fdatasync", os.fsync)(f.fileno())
        _drop_pages(f.fileno())  # (lazy-drop: starts the writeback, drops nothing dirty)

    def committed(self, path: str) -> None:
        """Called with a .bin's final path once renamed into place."""
        if self.policy != "lazy-drop":
            return
        previous, self._previous = self._previous, path
        if previous is not None:
            try:
                fd = os.open(previous, os.O_RDONLY)
            except OSError:
                return
            try:
                _drop_pages(fd)
            finally:
                os.close(fd)
