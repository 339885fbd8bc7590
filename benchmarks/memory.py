"""Peak-memory benchmark: one long 84x84x3 episode per variant, each in its own subprocess.

The growth of the peak RSS (``VmHWM``, reset before the stepping loop; ``ru_maxrss`` where
``/proc`` is missing) over the loop shows that gym_recorder's memory stays near its batch target
however long the episode. :func:`rss_child` runs in the subprocess.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile

import gymnasium as gym
import numpy as np

from gym_recorder import RecordingWrapper

from harness import MIB, SEED
from recorders import IMAGE_ENV, minari_collector


def _status_kib(field_name: str) -> int | None:
    """A ``VmRSS``/``VmHWM`` line of /proc/self/status, in KiB (None where there is none)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> bool:
    """Resets this process's peak RSS (VmHWM) to its current RSS (Linux >= 4.0)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


def rss_child(variant: str, steps: int, workdir: str) -> dict:
    """In a subprocess: one long 84x84x3 episode; returns peak RSS before and after.

    ``ru_maxrss`` of a fresh subprocess starts at the parent's size (Linux keeps the high-water
    mark across fork and exec), so the peak is read from /proc/self/status (VmHWM, reset before
    the loop) where it exists, else from ``ru_maxrss``.
    """
    env = gym.make(IMAGE_ENV, height=84, width=84, episode_length=steps + 1)
    directory = tempfile.mkdtemp(prefix=f"rss-{variant}-", dir=workdir)
    if variant == "gym_recorder":
        env = RecordingWrapper(env, directory)
    elif variant.startswith("minari-"):
        os.environ["MINARI_DATASETS_PATH"] = directory
        wrap, _, _ = minari_collector()
        env = wrap(env, variant.split("-", 1)[1])
    actions = np.random.default_rng(SEED).integers(0, 4, steps).tolist()
    env.reset(seed=SEED)
    for a in actions[:50]:  # allocations that any variant makes once
        env.step(a)
    gc.collect()
    proc = _reset_peak_rss() and _status_kib("VmRSS") is not None
    before = _status_kib("VmRSS") if proc else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for a in actions[50:]:
        env.step(a)
    if variant.startswith("minari-"):
        env._flush_to_storage()
    env.close()
    after = _status_kib("VmHWM") if proc else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    shutil.rmtree(directory, ignore_errors=True)
    return {"variant": variant, "before": before * 1024, "after": after * 1024,
            "source": "VmHWM" if proc else "ru_maxrss"}


def bench_rss(variants: list[str], steps: int, workdir: str, script: str) -> dict:
    """Runs :func:`rss_child` for every variant in a subprocess of ``script``."""
    out = {}
    for v in variants:
        proc = subprocess.run([sys.executable, script, "--rss-child", v,
                               "--rss-steps", str(steps), "--workdir", workdir],
                              capture_output=True, text=True, check=False)
        line = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else ""
        if proc.returncode != 0 or not line.startswith("{"):
            out[v] = {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
            continue
        doc = json.loads(line)
        out[v] = {"before_mb": doc["before"] / MIB, "after_mb": doc["after"] / MIB,
                  "growth_mb": (doc["after"] - doc["before"]) / MIB, "source": doc["source"]}
    return out
