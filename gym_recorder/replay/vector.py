"""Replaying a vector env whose sub-envs cannot be made one by one (a native vector entry point).

``gymnasium.make_vec(id, num_envs)`` defaults to the env's own vector implementation when it has
one (``vectorization_mode="vector_entry_point"``, e.g. CartPole's ``CartPoleVectorEnv``): one
object steps every sub-env with shared random streams, so sub-envs cannot be replayed apart.
Such a writer is replayed whole: the vector env is made again with the recorded kwargs, reset
with the seed of the first reset, and stepped with every sub-env's recorded actions at once.

Each sub-env's episodes, in order, are its timeline: in ``NextStep`` mode a sub-env spends one
vector step (its *reset step*, not recorded as a transition) between an episode's end and the
next episode; in ``SameStep`` mode none. Vector step k is position k of every timeline. A reset
step's action is ignored by the env; the sub-env's next recorded action is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .compare import first_difference, tree_row

__all__ = ["replay_vector_writer"]


def _stack(items: list[Any]) -> Any:
    """Stacks per-sub-env values (arrays, dicts, tuples of them) into one batch."""
    first = items[0]
    if isinstance(first, dict):
        return {k: _stack([it[k] for it in items]) for k in first}
    if isinstance(first, tuple):
        return tuple(_stack([it[j] for it in items]) for j in range(len(first)))
    return np.stack([np.asarray(it) for it in items])


def replay_vector_writer(episodes: list[Any], manifest: Mapping[str, Any], kwargs: dict[str, Any],
                         render: bool, make: Callable[..., Any],
                         check_type: Callable[..., Any]) -> dict[int, Any]:
    """Replays all episodes of one vector writer; returns {episode index: check}.

    Args:
        episodes: the writer's episodes (reader order).
        manifest: the writer's manifest.
        kwargs: env kwargs for ``make_vec`` (its own arguments removed).
        render: also collect each episode's frames.
        make: ``make(num_envs, kwargs)`` -> the vector env.
        check_type: builds an EpisodeCheck: ``(ep, status, step, message, frames, fps)``.
    """
    vector = manifest.get("vector") or {}
    num_envs = vector.get("num_envs")
    mode = vector.get("autoreset_mode")
    results: dict[int, Any] = {}
    by_sub: dict[int, list[Any]] = {}
    for ep in episodes:
        by_sub.setdefault(ep.sub_env, []).append(ep)
    if type(num_envs) is not int or sorted(by_sub) != list(range(num_envs)) or mode not in (
            "NextStep", "SameStep"):
        for ep in episodes:
            results[ep.index] = check_type(ep, "skipped", None, (
                f"a native vector env in autoreset mode {mode!r}: replayed only in NextStep or "
                "SameStep mode, with every sub-env recorded"), None, None)
        return results
    seeds = [subs[0].seed for _, subs in sorted(by_sub.items())]
    if seeds[0] is None or any(s != seeds[0] + i for i, s in enumerate(seeds)):
        for ep in episodes:
            results[ep.index] = check_type(ep, "skipped", None, "the vector env's first reset "
                                           "was not seeded", None, None)
        return results
    # Each sub-env's timeline: per vector step, (episode, step within it) or (next episode, -1)
    # for a reset step; usable until an episode that did not end by itself.
    timelines: list[list[tuple[Any, int]]] = []
    for i in range(num_envs):
        line: list[tuple[Any, int]] = []
        subs = by_sub[i]
        for k, ep in enumerate(subs):
            line.extend((ep, t) for t in range(ep.length))
            if ep.end not in ("terminated", "truncated") or k + 1 == len(subs):
                break
            if mode == "NextStep":
                line.append((subs[k + 1], -1))
        timelines.append(line)
    horizon = min(len(line) for line in timelines)
    env = make(num_envs, kwargs)
    failed: dict[int, tuple[int, str]] = {}  # episode index -> (step, difference)
    frames: dict[int, list[Any]] = {}
    fps = env.metadata.get("render_fps") if render else None
    try:
        obs, _ = env.reset(seed=seeds[0])

        def note_frames(positions: list[tuple[Any, int]], first: bool) -> None:
            if not render:
                return
            shots = env.render()
            for i, (ep, t) in enumerate(positions):
                if first or t == -1:
                    frames[ep.index] = [shots[i]]
                else:
                    frames.setdefault(ep.index, []).append(shots[i])

        starts = [(by_sub[i][0], -1) for i in range(num_envs)]
        for i, (ep, _) in enumerate(starts):
            d = first_difference(tree_row(ep.observations, 0), tree_row(obs, i),
                                 "reset observation")
            if d is not None:
                failed[ep.index] = (0, d)
        note_frames(starts, True)
        for k in range(horizon):
            positions = [timelines[i][k] for i in range(num_envs)]
            actions = []
            for i, (ep, t) in enumerate(positions):
                if t >= 0:
                    actions.append(tree_row(ep.actions, t))
                else:  # a reset step: the action is ignored; send the next recorded one
                    actions.append(tree_row(ep.actions, 0) if ep.length else
                                   env.single_action_space.sample())
            obs, rewards, terms, truncs, _ = env.step(_stack(actions))
            note_frames(positions, False)
            for i, (ep, t) in enumerate(positions):
                if ep.index in failed:
                    continue
                if t == -1:
                    d = first_difference(tree_row(ep.observations, 0), tree_row(obs, i),
                                         "reset observation")
                    step = 0
                else:
                    step = t + 1
                    d = first_difference(tree_row(ep.observations, t + 1), tree_row(obs, i),
                                         "observation")
                    if d is None and float(rewards[i]) != float(ep.rewards[t]):
                        d = f"reward {float(rewards[i])!r}, recorded {float(ep.rewards[t])!r}"
                    elif d is None and bool(terms[i]) != bool(ep.terminations[t]):
                        d = f"terminated {bool(terms[i])}, recorded {bool(ep.terminations[t])}"
                    elif d is None and bool(truncs[i]) != bool(ep.truncations[t]):
                        d = f"truncated {bool(truncs[i])}, recorded {bool(ep.truncations[t])}"
                if d is not None:
                    failed[ep.index] = (step, d)
    finally:
        env.close()
    covered = {ep.index: 0 for line in timelines for ep, _ in line[:horizon]}
    for line in timelines:
        for ep, t in line[:horizon]:
            covered[ep.index] = max(covered[ep.index], t + 1)
    for ep in episodes:
        if ep.index in failed:
            step, d = failed[ep.index]
            results[ep.index] = check_type(ep, "mismatch", step, d, frames.get(ep.index), fps)
        elif ep.index in covered and (covered[ep.index] == ep.length or by_sub[ep.sub_env][0]
                                      is ep and ep.length == 0):
            results[ep.index] = check_type(ep, "match", None, "", frames.get(ep.index), fps)
        else:
            results[ep.index] = check_type(ep, "skipped", None, (
                "beyond what the whole vector env can replay (another sub-env's recording ends "
                "earlier, or an episode ended without terminating or truncating)"), None, None)
    return results
