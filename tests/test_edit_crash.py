"""kill -9 at random moments of edit, compact, merge and split: the recording still opens,
verifies clean, and holds every episode exactly once, in the old state or the new.

A child process edits in a loop and prints a line before and after each commit; the parent
SIGKILLs it at a random moment, then checks the files against those lines.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from conftest import record_cartpole
from gym_recorder import RecordingReader
from gym_recorder.integrity import verify

ROOT = Path(__file__).resolve().parents[1]

# Deletes, compactions and restores at random, printing "begin N" / "done N" (N: the episodes
# shown once it is done). argv: directory, seed, and optionally the mix as JSON: the chance of a
# delete, the most episodes it deletes, the chance of a compaction, its batch targets.
EDIT_CHILD = r"""
import json, random, sys
from gym_recorder import RecordingReader, edit
from gym_recorder.edit.compact import compact
d = sys.argv[1]
rng = random.Random(int(sys.argv[2]))
mix = {"delete": 0.6, "most": 3, "compact": 0.5, "targets": [3000, 100000]}
mix.update(json.loads(sys.argv[3]) if len(sys.argv) > 3 else {})
print("ready", flush=True)
while True:
    with RecordingReader(d) as r:
        n = len(r)
    if n > 3 and rng.random() < mix["delete"]:
        k = rng.randint(1, mix["most"])
        print("begin", n - k, flush=True)
        edit.delete(d, rng.sample(range(n), k))
        print("done", n - k, flush=True)
    elif rng.random() < mix["compact"]:
        print("begin", n, flush=True)
        compact(d, grace=0, target_batch_bytes=rng.choice(mix["targets"]))
        print("done", n, flush=True)
    else:
        deleted = len(edit.deleted_episodes(d))
        if deleted:
            print("begin", n + deleted, flush=True)
            edit.restore(d, all=True)
            print("done", n + deleted, flush=True)
"""

COPY_CHILD = r"""
import sys
from gym_recorder.edit.copies import merge, split
s0, s1, s2, dest, new, a, b = sys.argv[1:8]
print("ready", flush=True)
print("merge", flush=True)
merge([s1, s2], dest)
print("merged", flush=True)
merge([s1, s2], new)
print("new", flush=True)
split(dest, {a: 0.5, b: 0.5}, seed=1)
print("split", flush=True)
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def _prints(code: str, args: list[str], kill_after: float, may_end: bool = False) -> list[str]:
    child = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                             text=True, env=_env())
    assert child.stdout is not None
    assert child.stdout.readline() == "ready\n"  # imported: the kill lands in the work
    time.sleep(kill_after)
    child.send_signal(signal.SIGKILL)
    out, _ = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL or (may_end and child.returncode == 0), \
        "the child ended before the kill"
    return out.split("\n")[:-1] if not out.endswith("\n") else out.splitlines()


def _prints_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if line]


def fingerprints(d: Path) -> Counter:
    with RecordingReader(d) as reader:
        return Counter(b"".join(np.ascontiguousarray(getattr(ep, f)).tobytes() for f in
                                ("observations", "actions", "rewards")) for ep in reader)


def kill_edits_and_check(d: Path, trial: int, seconds: float, everything: Counter,
                         mix: str | None = None) -> tuple[Counter, bool]:
    """Runs EDIT_CHILD on ``d`` (with ``mix``), kills it after ``seconds``, and checks what is
    left: verify clean, every episode of ``everything`` at most once and nothing else, and as
    many as the last edit finished with, or (killed inside one) as before it. Returns what is
    left and whether the kill fell inside an edit."""
    args = [str(d), str(trial)] + ([mix] if mix is not None else [])
    lines = _prints_lines(_prints(EDIT_CHILD, args, seconds))
    assert lines, "the child printed nothing before the kill: give it more time"
    last = lines[-1].split()
    counts = {int(last[1])}
    inside = last[0] == "begin"
    if inside:  # killed inside an edit: the old state or the new
        done = [line for line in lines if line.startswith("done")]
        counts.add(int(done[-1].split()[1]) if done else len(everything))
    assert verify(d) == [], trial
    got = fingerprints(d)
    assert sum(got.values()) in counts, (trial, lines[-2:])
    assert max(got.values(), default=1) == 1 and not (set(got) - set(everything))
    return got, inside


@pytest.mark.stress
def test_kill_during_edits_and_compaction(tmp_path: Path) -> None:
    source = tmp_path / "source"
    record_cartpole(source, episodes=40, target_batch_bytes=2500)
    everything = fingerprints(source)
    assert max(everything.values()) == 1
    rng = random.Random(0)
    mid = 0
    for trial in range(6):
        d = tmp_path / f"t{trial}"
        shutil.copytree(source, d)
        _, inside = kill_edits_and_check(d, trial, rng.uniform(0.3, 1.5), everything)
        mid += inside
        shutil.rmtree(d)
    print(f"\n{mid} of 6 kills inside an edit or compaction")


@pytest.mark.stress
def test_kill_during_merge_and_split(tmp_path: Path) -> None:
    srcs = []
    for k in range(3):
        srcs.append(tmp_path / f"s{k}")
        record_cartpole(srcs[-1], episodes=6, seed=k, target_batch_bytes=1500)
    base = fingerprints(srcs[0])
    incoming = fingerprints(srcs[1]) + fingerprints(srcs[2])
    rng = random.Random(1)
    stages: Counter = Counter()
    for trial in range(6):
        t = tmp_path / f"t{trial}"
        dest = t / "dest"
        shutil.copytree(srcs[0], dest)
        paths = [str(p) for p in (*srcs, dest, t / "new", t / "a", t / "b")]
        lines = _prints_lines(_prints(COPY_CHILD, paths, rng.uniform(0.0, 0.25), may_end=True))
        stages[lines[-1] if lines else "start"] += 1
        assert verify(dest) == []
        got = fingerprints(dest)
        assert got in (base, base + incoming), trial  # the old state or the new
        if (t / "new").exists():
            assert verify(t / "new") == [] and fingerprints(t / "new") == incoming
        parts = [fingerprints(t / x) for x in ("a", "b") if (t / x).exists()]
        if len(parts) == 2:
            assert parts[0] + parts[1] == base + incoming  # each episode exactly once
        for part in parts:
            assert not (set(part) - set(base + incoming))
        leftovers = [n for n in os.listdir(t) if n.startswith(".")]
        for n in leftovers:  # a killed split's hidden, half-built output: never a recording
            assert ".tmp-" in n
        shutil.rmtree(t)
    print(f"\nkilled after: {dict(stages)}")


# ---------------------------------------------------------------------------------------------
# Killed at every step: a forked child SIGKILLs itself at its k-th file-system write (an audit
# event: a file opened for writing, a link, rename, removal, mkdir), for k = 1, 2, ... until
# the operation ends before step k.

_WRITE_EVENTS = {"os.link", "os.rename", "os.remove", "os.mkdir", "os.rmdir", "shutil.rmtree",
                 "os.symlink", "os.truncate"}
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC


def _writes(event: str, args: tuple) -> bool:
    if event in _WRITE_EVENTS:
        return True
    if event != "open" or len(args) < 3:
        return False
    mode, flags = args[1], args[2]
    return bool((isinstance(mode, str) and any(c in mode for c in "wax+"))
                or (isinstance(flags, int) and flags & _WRITE_FLAGS))


def _killed_at(step: int, op) -> bool:
    """Runs ``op`` in a forked child killed at its ``step``-th write; False if it ended first."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            count = [0]

            def hook(event: str, args: tuple) -> None:
                if _writes(event, args):
                    count[0] += 1
                    if count[0] == step:
                        os.kill(os.getpid(), signal.SIGKILL)

            sys.addaudithook(hook)
            op()
            os._exit(0)
        except BaseException:  # noqa: BLE001
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) or os.WEXITSTATUS(status) == 0, "the operation failed"
    return os.WIFSIGNALED(status)


def _every_step(tmp_path: Path, setup, op, check) -> int:
    tmp_path.mkdir()
    step = 0
    while True:
        step += 1
        work = tmp_path / f"step{step}"
        setup(work)
        killed = _killed_at(step, lambda: op(work))
        check(work)
        shutil.rmtree(work)
        if not killed:
            return step - 1


@pytest.mark.stress
def test_kill_at_every_step_of_delete_compact_merge_split(tmp_path: Path) -> None:
    from gym_recorder import edit
    from gym_recorder.edit.compact import compact
    from gym_recorder.edit.copies import merge, split

    src, other = tmp_path / "src", tmp_path / "other"
    record_cartpole(src, episodes=8, target_batch_bytes=6000)  # a few batches
    record_cartpole(other, episodes=3, seed=1)
    old, incoming = fingerprints(src), fingerprints(other)

    def fresh(work: Path) -> None:
        work.mkdir()
        shutil.copytree(src, work / "rec")

    def sound(d: Path, allowed: list[Counter]) -> None:
        assert verify(d) == []
        assert fingerprints(d) in allowed

    probe = tmp_path / "probe"
    shutil.copytree(src, probe)
    edit.delete(probe, [1, 5])
    deleted = fingerprints(probe)
    steps = {}
    steps["delete"] = _every_step(tmp_path / "d", fresh, lambda w: edit.delete(w / "rec", [1, 5]),
                                  lambda w: sound(w / "rec", [old, deleted]))

    def fresh_deleted(work: Path) -> None:
        work.mkdir()
        shutil.copytree(probe, work / "rec")

    steps["compact"] = _every_step(tmp_path / "c", fresh_deleted,
                                   lambda w: compact(w / "rec", grace=0),
                                   lambda w: sound(w / "rec", [deleted]))
    steps["merge"] = _every_step(tmp_path / "m", fresh, lambda w: merge([other], w / "rec"),
                                 lambda w: sound(w / "rec", [old, old + incoming]))

    def split_sound(w: Path) -> None:
        sound(w / "rec", [old])
        parts = [fingerprints(w / x) for x in ("a", "b") if (w / x).exists()]
        for x in ("a", "b"):
            if (w / x).exists():
                assert verify(w / x) == []
        if len(parts) == 2:
            assert parts[0] + parts[1] == old

    steps["split"] = _every_step(tmp_path / "s", fresh,
                                 lambda w: split(w / "rec", {str(w / "a"): 0.5,
                                                             str(w / "b"): 0.5}, seed=0),
                                 split_sound)
    print(f"\nkilled at every step: {steps}")
    assert all(n >= 3 for n in steps.values())
