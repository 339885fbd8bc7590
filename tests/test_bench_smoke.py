"""The benchmark in its tiniest configuration: it runs, and prints every target of issue 12.

The figures of a ``--tiny`` run mean nothing (a few hundred steps, one repeat); what this checks is
that ``benchmarks/bench.py`` still runs end to end against the library, and that no target line
goes missing: each is printed as ``ok`` or ``MISS``, never hidden.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every target the benchmark must report (issue 12), by its key.
TARGETS = [
    "rec.cartpole.added", "rec.image84.floor", "rec.image210.floor",
    "read.cartpole.episode", "read.84x84x3.fromfile", "read.210x160x3.fromfile",
    "read.cartpole.vs_seed", "read.84x84x3.vs_seed", "read.210x160x3.vs_seed",
    "read.cartpole.column", "read.84x84x3.column", "read.210x160x3.column",
    "open.fetch", "rss.peak",
    "stress.warm.vs_sync", "stress.neighbour.vs_sync", "stress.cold.vs_sync",
    "stress.warm.stable",
]


def test_tiny_benchmark_prints_every_target(tmp_path):
    out_json = tmp_path / "results.json"
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", "bench.py"), "--tiny", "--profile",
         "--json", str(out_json), "--workdir", str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    for key in TARGETS:
        hits = [ln for ln in lines if re.match(rf"\s+(ok|MISS)\s+{re.escape(key)}\s", ln)]
        assert len(hits) == 1, f"target {key} printed {len(hits)} times:\n{proc.stdout}"
        assert "not measured" not in hits[0], hits[0]
    # Every variant and condition of the recording and stability tables is there.
    for variant in ("floor", "sync", "gym_recorder"):
        assert sum(f" {variant} " in ln for ln in lines) >= 3 + 2, variant
    for cond in ("warm", "neighbour", "cold"):
        assert any(ln.strip().startswith(f"{cond} ") and "gym_recorder" in ln for ln in lines)
    assert "Profile: recording cartpole" in proc.stdout
    assert "Profile: reading CartPole-v1" in proc.stdout
    doc = json.loads(out_json.read_text())
    assert [t["key"] for t in doc["targets"]] == TARGETS
    assert {t["status"] for t in doc["targets"]} <= {"ok", "MISS"}
    assert not doc["stress"]["cold_errors"]
    # The seed's reader (np.fromfile of every array the JSON names) reads the same bytes as ours.
    for name, t in doc["reading"]["throughput"].items():
        assert t["seed_touched_bytes"] == t["touched_bytes"] > 0, name
    # Nothing is left behind in the work directory but the JSON.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_info_benchmark_runs_and_prints_its_figures():
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", "bench_infos.py"), "--steps", "300",
         "--repeats", "1"], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("bare step:", "added, infos recorded:", "added, record_infos=False:",
                  "the five info values:"):
        assert sum(ln.startswith(label) for ln in proc.stdout.splitlines()) == 1, proc.stdout


def test_training_benchmark_runs_and_prints_its_figures():
    env = dict(os.environ, PYTHONPATH=REPO)
    proc = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", "bench_training.py"), "--steps", "3000",
         "--repeats", "1", "--items", "200", "--image-episodes", "1"], capture_output=True,
        text=True, env=env,
        timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for label in ("np.fromfile of the .bin files", "transitions(reader), 3,000 steps:",
                  "ratio ", "  the same through the batch JSON:",
                  "  copying the ", "TransitionDataset, 200 shuffled items: first pass",
                  "TransitionDataset of 1 x 1,000 steps of 84x84x3, 200 shuffled items"):
        assert sum(ln.startswith(label) for ln in proc.stdout.splitlines()) == 1, proc.stdout
