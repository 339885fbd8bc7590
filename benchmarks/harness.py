"""The benchmark's harness: run sizes, memory priming, touching bytes, statistics, machine load.

Everything the other benchmark modules share and nothing that measures by itself. Imported by
``bench.py`` after it has put the checkout first on ``sys.path``.
"""

from __future__ import annotations

import os
import statistics
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

# Seed of the action streams and of the first reset; episode n is reset with SEED + n, in every
# variant, so that all variants step through exactly the same trajectories.
SEED = 12345
MIB = 1 << 20
MB = 1_000_000
# Priming (see prime_memory) touches about this much more than a run will write, capped so that
# a long full run stays well inside the machine's memory.
PRIME_FACTOR = 1.25
PRIME_MAX_BYTES = 2 << 30
# Other processes using more than this fraction of one core during the run competed with it: the
# report then says so (numbers are inflated, image rows most).
BUSY_OTHERS = 0.25


@dataclass(frozen=True)
class Config:
    """How big a run is: ``full``, ``quick`` (a couple of minutes) or ``tiny`` (CI smoke, seconds).

    Attributes:
        mode: ``"full"``, ``"quick"`` or ``"tiny"``.
        prime: touch memory before each timed run (``--no-prime`` turns it off).
        neighbour_bytes: what the neighbouring process writes during the stress recording.
    """

    mode: str
    prime: bool = True
    neighbour_bytes: int = 1 << 30

    def pick(self, full: Any, quick: Any, tiny: Any) -> Any:
        """The value for this run's mode."""
        return {"full": full, "quick": quick, "tiny": tiny}[self.mode]

    @property
    def repeats(self) -> int:
        return self.pick(9, 5, 1)

    @property
    def minari_repeats(self) -> int:
        return self.pick(5, 3, 1)

    @property
    def read_repeats(self) -> int:
        return self.pick(5, 3, 1)

    @property
    def read_episodes(self) -> int:
        """CartPole episodes of the reading benchmark (the targets speak of 10,000)."""
        return self.pick(10_000, 10_000, 200)


def prime_memory(nbytes: int) -> None:
    """Touches and frees ``nbytes`` of memory, so that the next run finds recently used pages.

    On VMs with free-page reporting (Firecracker here) memory freed for more than a moment goes
    back to the host, and the next first touch of a page costs a host fault (~0.35-0.5 GB/s
    instead of ~3.5 GB/s for writes into the page cache). Which state a run finds then depends
    on what ran seconds before it; priming gives every variant the same state, the one of an
    ordinary machine. ``--no-prime`` measures without it; the cold runs never prime.
    """
    if nbytes <= 0:
        return
    block = np.empty(min(nbytes, PRIME_MAX_BYTES), dtype=np.uint8)
    block.fill(1)
    del block


# Arrays up to this size are touched by a CRC-32 of their bytes: numpy's reduction costs about
# 2 us a call whatever the size, more than a reader spends on a small episode's array.
SMALL_TOUCH_BYTES = 64 << 10


def touch(arr: np.ndarray) -> int:
    """Reads every byte of an array (a cheap SIMD reduction, so that memory bandwidth counts;
    a CRC-32 for small contiguous arrays, which reads every byte too at a fraction of the
    call's cost)."""
    if arr.nbytes <= SMALL_TOUCH_BYTES and arr.flags.c_contiguous:
        return zlib.crc32(arr)
    flat = np.ascontiguousarray(arr).reshape(-1).view(np.uint8)
    return int(np.bitwise_or.reduce(flat)) if flat.size else 0


def touch_tree(value: Any) -> int:
    """``touch`` every array in a (nested) value; returns the bytes touched."""
    if isinstance(value, np.ndarray):
        touch(value)
        return value.nbytes
    if isinstance(value, dict):
        return sum(touch_tree(v) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(touch_tree(v) for v in value)
    return 0


def dir_bytes(path: str) -> int:
    """Total size of the regular files directly or indirectly under ``path``."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            total += os.path.getsize(os.path.join(root, name))
    return total


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def spread(values: list[float]) -> dict[str, float]:
    """min / median / max of a list (NaN for an empty one)."""
    if not values:
        nan = float("nan")
        return {"min": nan, "median": nan, "max": nan}
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def rotated(items: list, r: int) -> list:
    """``items`` rotated by ``r``, so that no variant always runs first."""
    if not items:
        return []
    k = r % len(items)
    return items[k:] + items[:k]


def system_busy_seconds() -> float | None:
    """CPU time used by every process on the machine since boot (Linux /proc/stat), or None."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """CPU time of this process and its waited-for children."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def obs_bytes(space: Any) -> int:
    """Bytes of one observation of a Box space."""
    return space.dtype.itemsize * int(np.prod(space.shape))
