"""Recording with many Ray actors into one directory (re-exported by :mod:`gym_recorder.integrations.ray`).

Each actor records with its own :class:`~gym_recorder.RecordingWrapper` (its own writer prefix)
into the same directory; worker k's first reset is seeded from :func:`worker_seeds`.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import install_hint

__all__ = ["record_parallel", "ParallelSummary", "worker_seeds", "SEED_BOUND"]

# The largest seed handed to a worker: gymnasium and numpy take any non-negative int, but some
# envs keep seeds in 32 bits.
SEED_BOUND = 2**32


def _ray() -> Any:
    try:
        import ray
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(f"record_parallel needs Ray: {install_hint('ray')} ({e})") from e
    return ray


def worker_seeds(seed: int, num_workers: int) -> list[int]:
    """The first-reset seeds of ``num_workers`` workers, derived from ``seed``: distinct and the
    same for the same arguments (numpy's SeedSequence, one child per worker)."""
    if type(seed) is not int or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    children = np.random.SeedSequence(seed).spawn(num_workers)
    out: list[int] = []
    for child in children:
        s = int(child.generate_state(1, dtype=np.uint32)[0])
        while s in out:  # a 32-bit collision: astronomically rare, but keep them distinct
            s = (s + 1) % SEED_BOUND
        out.append(s)
    return out


@dataclass(frozen=True)
class ParallelSummary:
    """What :func:`record_parallel` recorded.

    Attributes:
        directory: the recording directory.
        episodes: episodes that ended, over all workers.
        steps: transitions, over all workers.
        writers: each worker's writer prefix (named before the workers start: a worker that
            failed still has one, and what it committed is in the directory under it).
        seeds: each worker's first-reset seed.
        failures: worker index -> one line saying why it failed (its committed data is kept).
    """

    directory: str
    episodes: int
    steps: int
    writers: list[str | None]
    seeds: list[int]
    failures: dict[int, str] = field(default_factory=dict)


def _record_worker(env_spec: Any, directory: str, episodes: int, seed: int, policy: Any,
                   env_kwargs: dict[str, Any] | None, recorder_kwargs: dict[str, Any] | None,
                   started: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Records ``episodes`` episodes in this process; first reset seeded, later ones not."""
    from ..replay.run import make_env
    from ..record.wrapper import RecordingWrapper

    env = make_env(env_spec, env_kwargs) if isinstance(env_spec, str) else env_spec()
    rec = RecordingWrapper(env, directory, **dict(recorder_kwargs or {}))
    steps = done = 0
    try:
        if policy is None:
            rec.action_space.seed(seed)
            space = rec.action_space
            policy = lambda obs: space.sample()  # noqa: E731
        obs, _ = rec.reset(seed=seed)
        while done < episodes:
            obs, _, terminated, truncated, _ = rec.step(policy(obs))
            steps += 1
            if terminated or truncated:
                done += 1
                if done < episodes:
                    obs, _ = rec.reset()
    finally:
        rec.close()
    return {"prefix": rec.file_prefix, "episodes": done, "steps": steps}


def record_parallel(env_id_or_creator: str | Callable[[], Any], directory: str | os.PathLike[str],
                    *, num_workers: int, episodes_per_worker: int, seed: int | None = None,
                    policy: Callable[[Any], Any] | None = None,
                    env_kwargs: dict[str, Any] | None = None,
                    recorder_kwargs: dict[str, Any] | None = None) -> ParallelSummary:
    """Records an env with ``num_workers`` Ray actors, each with its own writer, into one directory.

    Worker k's first reset gets ``worker_seeds(seed, num_workers)[k]`` and later resets none (as
    ``gym-recorder record`` does), and its random policy samples the action space seeded with the
    same seed, so the same ``seed`` reproduces every episode. A worker that dies loses at most
    its recorder's flush interval; the others' data is intact, and the failure is reported in
    :attr:`ParallelSummary.failures`.

    Example::

        summary = record_parallel("CartPole-v1", "recordings/cp", num_workers=4,
                                  episodes_per_worker=100, seed=0)

    Args:
        env_id_or_creator: a registered id (made with ``env_kwargs``), or a zero-argument
            callable returning an env (pickled to the actors).
        directory: the recording directory, on a filesystem every actor can write.
        num_workers: the number of actors (each needs one CPU).
        episodes_per_worker: episodes each worker records.
        seed: the base seed (a random one when None; the summary gives the derived seeds).
        policy: ``policy(obs) -> action``; None samples the action space.
        env_kwargs: keyword arguments for ``gymnasium.make`` (only with an id).
        recorder_kwargs: keyword arguments for each :class:`~gym_recorder.RecordingWrapper`.

    Returns:
        A :class:`ParallelSummary`.

    Raises:
        ValueError: for a bad count or seed, a URL as directory, or a ``file_prefix`` in
            ``recorder_kwargs``.
        ReplayError: if ``env_id_or_creator`` is an id that cannot be made (checked in this
            process, before any actor starts).
    """
    ray = _ray()
    for name, value in (("num_workers", num_workers), ("episodes_per_worker",
                                                       episodes_per_worker)):
        if type(value) is not int or value < 1:
            raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    if not isinstance(env_id_or_creator, str) and not callable(env_id_or_creator):
        raise TypeError("env_id_or_creator must be an env id or a callable returning an env")
    if env_kwargs and not isinstance(env_id_or_creator, str):
        raise ValueError("env_kwargs only applies to an env id; a creator makes its own env")
    if "://" in os.fspath(directory):
        raise ValueError(f"record_parallel records into a local directory (every actor's "
                         f"filesystem), not {os.fspath(directory)!r}: record, then push it "
                         f"(gym_recorder.integrations.cloud.push)")
    if recorder_kwargs and "file_prefix" in recorder_kwargs:
        raise ValueError("record_parallel names each worker's writer; leave out file_prefix")
    if isinstance(env_id_or_creator, str):  # an id that cannot be made fails here, by name
        from ..replay.run import make_env
        make_env(env_id_or_creator, env_kwargs).close()
    if seed is None:
        seed = secrets.randbelow(SEED_BOUND)
    seeds = worker_seeds(seed, num_workers)
    directory = os.path.abspath(os.fspath(directory))
    os.makedirs(directory, exist_ok=True)

    from ..record.writer import default_prefix

    # Named here, so that a worker that dies is still found in the summary (and its data kept).
    writers: list[str | None] = [default_prefix() for _ in range(num_workers)]
    Recorder = ray.remote(num_cpus=1, max_restarts=0)(_RecorderActor)
    actors = [Recorder.remote() for _ in range(num_workers)]
    refs = [a.run.remote(env_id_or_creator, directory, episodes_per_worker, s, policy,
                         env_kwargs, {**dict(recorder_kwargs or {}), "file_prefix": prefix})
            for a, s, prefix in zip(actors, seeds, writers)]
    failures: dict[int, str] = {}
    episodes = steps = 0
    pending = {ref: k for k, ref in enumerate(refs)}
    try:
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            k = pending.pop(ready[0])
            try:
                result = ray.get(ready[0])
            except Exception as e:  # noqa: BLE001  (an actor died or its env raised)
                failures[k] = _reason(e)
            else:
                episodes += result["episodes"]
                steps += result["steps"]
            ray.kill(actors[k])  # frees its CPU for a worker still waiting for one
    finally:
        for a in actors:
            ray.kill(a)
    return ParallelSummary(directory=directory, episodes=episodes, steps=steps,
                           writers=writers, seeds=seeds, failures=failures)


def _reason(e: BaseException) -> str:
    """One line saying why a worker failed: the exception its code raised (a RayTaskError's
    cause), else Ray's own error (an actor that died), without Ray's traceback."""
    cause = getattr(e, "cause", None)
    err = cause if isinstance(cause, BaseException) else e
    text = str(err).strip()
    if err is e:  # Ray's message: its first line says what happened
        text = text.splitlines()[0] if text else ""
    text = " ".join(text.split())
    return f"{type(err).__name__}: {text}"[:500] if text else type(err).__name__


class _RecorderActor:
    """One recording worker (made a Ray actor by :func:`record_parallel`)."""

    def run(self, env_spec: Any, directory: str, episodes: int, seed: int, policy: Any,
            env_kwargs: dict[str, Any] | None, recorder_kwargs: dict[str, Any] | None) -> dict[str, Any]:
        return _record_worker(env_spec, directory, episodes, seed, policy, env_kwargs,
                              recorder_kwargs)
