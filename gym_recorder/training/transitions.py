"""Flat transition arrays of a selection of episodes: what an off-policy learner wants.

:func:`transitions` concatenates, column by column, the episodes of a selection into
``obs``, ``next_obs``, ``action``, ``reward``, ``terminated``, ``truncated``, ``episode`` and
``step``, one row per step. Dict and Tuple spaces give dicts and tuples of arrays; every leaf
keeps the dtype it was recorded with. All observations of the selection are held once, in
``observations`` (each episode's N + 1 rows one after another); ``obs`` and ``next_obs`` are
taken from it: views of it (``observations[:-1]`` and ``observations[1:]``) for a single
episode, gathered copies otherwise.

Example:
    >>> from gym_recorder import RecordingReader
    >>> from gym_recorder.training.transitions import transitions
    >>> with RecordingReader("recordings/cartpole") as reader:          # doctest: +SKIP
    ...     t = transitions(reader)
    >>> t.obs.shape, t.next_obs.dtype, t.reward.dtype                   # doctest: +SKIP
    ((215, 4), dtype('float32'), dtype('float64'))
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..format.agents import ACT_KEY, OBS_KEY, MultiAgent, parse_multiagent
from ..read.wholecolumn import join_rows
from ..errors import EmptySelectionError, UnsupportedSpaceError
from ..read.reader import RecordingReader
from .agents import agent_columns
from .selection import episode_indices, selection_source

__all__ = ["Transitions", "transitions", "STACK_PADDINGS", "tree_map", "tree_leaves", "take_rows", "gather",
           "concat"]


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Applies ``f`` to every leaf of ``tree`` (and the matching leaves of ``rest``): dicts and
    tuples are walked, anything else (arrays, lists of values) is a leaf."""
    if isinstance(tree, dict):
        return {k: tree_map(f, v, *(r[k] for r in rest)) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(tree_map(f, v, *(r[i] for r in rest)) for i, v in enumerate(tree))
    return f(tree, *rest)


def tree_leaves(tree: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Yields ``(dotted path, leaf)``: ``""`` for a lone leaf, else ``"key.sub"`` / ``"0.1"``."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            yield from tree_leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(tree, tuple):
        for i, v in enumerate(tree):
            yield from tree_leaves(v, f"{prefix}.{i}" if prefix else str(i))
    else:
        yield prefix, tree


def _structure(tree: Any) -> Any:
    if isinstance(tree, dict):
        return {k: _structure(v) for k, v in tree.items()}
    if isinstance(tree, tuple):
        return tuple(_structure(v) for v in tree)
    return None


def take_rows(arr: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``arr[rows]`` for an array of rows: each row taken as one opaque item when the rows are
    contiguous bytes (numpy's fancy indexing otherwise copies a (n, 4) float32 array element
    by element: about 8 times slower)."""
    row_bytes = arr.strides[0] if arr.ndim > 1 and arr.size else 0
    if not row_bytes or not arr.flags.c_contiguous or arr.dtype.hasobject:
        out: np.ndarray = arr[rows]
        return out
    items = arr.reshape(len(arr), -1).view(np.dtype((np.void, row_bytes))).reshape(len(arr))
    taken: np.ndarray = items[rows].view(arr.dtype).reshape(-1, *arr.shape[1:])
    return taken


def gather(tree: Any, rows: np.ndarray) -> Any:
    """Rows ``rows`` of every leaf (fancy indexing for arrays, a list for lists of values)."""
    return tree_map(lambda leaf: take_rows(leaf, rows) if isinstance(leaf, np.ndarray)
                    else [leaf[int(r)] for r in rows], tree)


def _slice(tree: Any, s: slice) -> Any:
    return tree_map(lambda leaf: leaf[s], tree)


def concat(trees: Sequence[Any], where: str) -> Any:
    """Concatenates trees of one structure leaf by leaf, every value kept exactly."""
    first = _structure(trees[0])
    for k, t in enumerate(trees[1:], 1):
        if _structure(t) != first:
            raise UnsupportedSpaceError(f"{where}: part {k} has a different structure than part 0")

    def cat(*leaves: Any) -> Any:
        # (a leaf widened in some batches, see the format's "Trees": kept exactly, as rows
        # when no one dtype holds every value; rows of other shapes, which gym-recording
        # episodes may hold, refused by name)
        return join_rows(where, "rows", list(leaves))

    return tree_map(cat, trees[0], *trees[1:])


@dataclass(frozen=True)
class Transitions:
    """One row per step of a selection of episodes.

    Attributes:
        obs: the observation each step was taken from (S rows; dict/tuple for Dict/Tuple spaces).
        next_obs: the observation each step led to (S rows).
        action, reward, terminated, truncated: per step, as recorded (reward float64, flags bool).
        episode: int64 reader index of each step's episode.
        step: int64 index of each step in its episode.
        observations: every observation of the selection, each episode's N + 1 rows in turn.
        episodes: int64 reader indices of the selected episodes, in order.
        starts: int64 first step row of each selected episode (E + 1 entries, the last is S).
        agent: for a multi-agent recording, the int64 index (in the recording's agents) of
            each step's agent; else None.
    """

    obs: Any
    next_obs: Any
    action: Any
    reward: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    episode: np.ndarray
    step: np.ndarray
    observations: Any
    episodes: np.ndarray
    starts: np.ndarray
    agent: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.reward)

    def rows(self, rows: np.ndarray | Sequence[int]) -> dict[str, Any]:
        """The given step rows as a dict of (trees of) arrays: one batch for a learner."""
        rows = np.asarray(rows, dtype=np.int64)
        out = {"obs": gather(self.obs, rows), "next_obs": gather(self.next_obs, rows),
               "action": gather(self.action, rows), "reward": self.reward[rows],
               "terminated": self.terminated[rows], "truncated": self.truncated[rows],
               "episode": self.episode[rows], "step": self.step[rows]}
        if self.agent is not None:
            out["agent"] = self.agent[rows]
        return out

    def sample(self, n: int, rng: np.random.Generator, *, replace: bool = True) -> dict[str, Any]:
        """``n`` steps drawn uniformly with ``rng`` (reproducible for a seeded Generator).

        Raises:
            EmptySelectionError: if ``replace`` is False and there are fewer than ``n`` steps.
        """
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
        check_count(n)
        if (not replace and n > len(self)) or (n and not len(self)):
            raise EmptySelectionError(f"cannot draw {n} of {len(self)} steps"
                                      f"{'' if replace else ' without replacement'}")
        return self.rows(rng.choice(len(self), size=n, replace=replace))


def check_count(n: Any) -> None:
    """A number of draws must be an int >= 0 (ValueError, TypeError otherwise)."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)):
        raise TypeError(f"the number to draw must be an int, got {n!r}")
    if n < 0:
        raise ValueError(f"the number to draw must be >= 0, got {n}")


def _episode_columns(reader: RecordingReader, indices: Sequence[int]) -> Iterator[tuple[Any, ...]]:
    """(index, observations, actions, rewards, terminations, truncations) per episode, in the
    order of ``indices``.

    With the reader's batch interface (``batches()`` / ``read_batch()``), each batch that holds
    a part of a selected episode is decoded once, and batches without one are not read;
    otherwise episode by episode.
    """
    if not (hasattr(reader, "batches") and hasattr(reader, "read_batch")):
        for i in indices:
            ep = reader[i]
            yield i, ep.observations, ep.actions, ep.rewards, ep.terminations, ep.truncations
        return
    wanted = set(indices)
    parts: dict[int, list[Any]] = {}
    for info in reader.batches():
        if wanted.isdisjoint(info.episodes):
            continue
        for p in reader.read_batch(info):
            if p.episode in wanted:
                ps = parts.get(p.episode)
                if ps is None:
                    parts[p.episode] = [p]
                else:
                    ps.append(p)
    for i in indices:
        ps = parts.get(i, [])
        if len(ps) > 1:
            ps.sort(key=lambda p: p.part)
        if not ps:
            ep = reader[i]  # e.g. a legacy episode outside the batch interface
            yield i, ep.observations, ep.actions, ep.rewards, ep.terminations, ep.truncations
            continue
        if len(ps) == 1:
            p = ps[0]
            yield i, p.observations, p.actions, p.rewards, p.terminations, p.truncations
            continue
        where = f"{reader.directory} episode {i}"
        yield (i, concat([p.observations for p in ps], f"{where} observations"),
               concat([p.actions for p in ps], f"{where} actions"),
               np.concatenate([p.rewards for p in ps]),
               np.concatenate([p.terminations for p in ps]),
               np.concatenate([p.truncations for p in ps]))


# How stack=k pads the first k - 1 steps of an episode: as gymnasium's FrameStackObservation.
STACK_PADDINGS = ("reset", "zero")


def transitions(reader: RecordingReader, episodes: Iterable[int] | None = None, *,
                stack: int | None = None, padding: str = "reset",
                agent: str | None = None) -> Transitions:
    """Builds the flat transitions of the given episodes (all by default), in that order.

    Args:
        reader: an open reader.
        episodes: reader indices, e.g. from :func:`gym_recorder.training.selection.select`.
        stack: give ``obs`` and ``next_obs`` as the last ``stack`` observations up to each
            (shape ``(S, stack, *leaf shape)`` per leaf), as DQN-style agents take them:
            equal to what ``gymnasium.wrappers.FrameStackObservation(env, stack,
            padding_type=padding)`` would have returned, so that a recording of single frames
            need not hold every frame ``stack`` times. ``observations`` stays unstacked.
        padding: before an episode's first observation, ``"reset"`` repeats it,
            ``"zero"`` gives zeros (FrameStackObservation's ``padding_type``).

        agent: for a multi-agent recording, the agent whose transitions to build (from each of
            its rows at which it acted to its next row, see :mod:`gym_recorder.training.agents`);
            None: every agent's, episode by episode, with an ``agent`` column, when all agents
            have the same spaces.


    Raises:
        EmptySelectionError: if there are no episodes.
        UnsupportedSpaceError: if episodes of the selection have different structures,
            ``stack`` meets a leaf stored as values (Text, rows of other shapes), ``agent`` is
            given for a single-agent recording, or is None for agents of different spaces.
        KeyError: for an agent the recording does not have.
        ValueError: if ``stack`` is not an int >= 1 or ``padding`` not one of
            :data:`STACK_PADDINGS`.
    """
    if stack is not None and (isinstance(stack, bool) or not isinstance(stack, int)
                              or stack < 1):
        raise ValueError(f"stack must be an int >= 1, got {stack!r}")
    if padding not in STACK_PADDINGS:
        raise ValueError(f"padding must be one of {', '.join(STACK_PADDINGS)}, got {padding!r}")
    indices = episode_indices(reader, episodes)
    # one set of spaces (else UnsupportedSpaceError), or empty
    source = selection_source(reader, indices)
    ma = parse_multiagent(source.manifest, str(reader.directory)) if source.manifest else None
    if ma is not None or agent is not None:
        return _agent_transitions(reader, indices, ma, agent, source.manifest)
    # Through the batches' indexes when they have them (no JSON parsed), else batch by batch.
    stacked = reader._stacked(indices) if isinstance(reader, RecordingReader) else None
    if stacked is not None:
        observations, actions = stacked.observations, stacked.actions
        reward, terminated, truncated = stacked.step_columns()
        lengths_a = stacked.lengths
    else:
        obs_parts, act_parts, rew, term, trunc, lengths = [], [], [], [], [], []
        for _, obs, act, r, te, tr in _episode_columns(reader, indices):
            obs_parts.append(obs)
            act_parts.append(act)
            rew.append(r)
            term.append(te)
            trunc.append(tr)
            lengths.append(len(r))
        where = f"{reader.directory}"
        observations = concat(obs_parts, f"{where} observations")
        actions = concat(act_parts, f"{where} actions")
        reward, terminated, truncated = (_cat(rew, np.float64), _cat(term, np.bool_),
                                         _cat(trunc, np.bool_))
        lengths_a = np.asarray(lengths, dtype=np.int64)
    starts = np.zeros(len(indices) + 1, dtype=np.int64)
    np.cumsum(lengths_a, out=starts[1:])
    total = int(starts[-1])
    ep_ord = np.repeat(np.arange(len(indices), dtype=np.int64), lengths_a)
    step = np.arange(total, dtype=np.int64) - starts[:-1][ep_ord]
    if stack is not None:
        first_obs = starts[:-1][ep_ord] + ep_ord  # each step's episode's first observation row
        obs_v = _stacked(observations, first_obs, step, stack, padding)
        next_v = _stacked(observations, first_obs, step + 1, stack, padding)
    elif len(indices) == 1:  # the layout allows views: observations[:-1] and observations[1:]
        obs_v, next_v = _slice(observations, slice(0, -1)), _slice(observations, slice(1, None))
    else:
        rows = np.arange(total, dtype=np.int64) + ep_ord  # observation row before each step
        obs_v, next_v = gather(observations, rows), gather(observations, rows + 1)
    episodes_a = np.asarray(indices, dtype=np.int64)
    return Transitions(obs=obs_v, next_obs=next_v, action=actions,
                       reward=reward, terminated=terminated,
                       truncated=truncated, episode=episodes_a[ep_ord], step=step,
                       observations=observations, episodes=episodes_a, starts=starts)


def _stacked(observations: Any, first: np.ndarray, at: np.ndarray, k: int,
             padding: str) -> Any:
    """For each row, observations ``at - k + 1 .. at`` of its episode (``first`` its first
    observation row) stacked on a new axis 1, the rows before the episode's start padded."""
    def leaf(arr: Any) -> np.ndarray:
        if not isinstance(arr, np.ndarray):
            raise UnsupportedSpaceError("stack: a leaf stored as values (Text, rows of other "
                                        "shapes) cannot be stacked")
        out = np.empty((len(at), k, *arr.shape[1:]), dtype=arr.dtype)
        for i in range(k):
            back = at - (k - 1 - i)
            out[:, i] = take_rows(arr, first + np.maximum(back, 0))
            if padding == "zero":
                out[back < 0, i] = 0
        return out

    return tree_map(leaf, observations)


def _agent_transitions(reader: RecordingReader, indices: Sequence[int], ma: MultiAgent | None,
                       agent: str | None, manifest: dict[str, Any]) -> Transitions:
    where = str(reader.directory)
    if ma is None:
        raise UnsupportedSpaceError(f"{where}: agent={agent!r} given, but this is a "
                                    "single-agent recording")
    names = [agent] if agent is not None else list(ma.agents)
    for name in names:
        ma.index(name)  # (KeyError naming the agents)
    if agent is None:
        descs = {json.dumps([dict(manifest["observation_space"]["spaces"])[OBS_KEY]["spaces"][i][1],
                             dict(manifest["action_space"]["spaces"])[ACT_KEY]["spaces"][i][1]],
                            sort_keys=True)
                 for i in range(len(ma.agents))}
        if len(descs) > 1:
            raise UnsupportedSpaceError(f"{where}: the agents have different spaces; pass "
                                        f"agent=NAME (one of {list(ma.agents)})")
    obs_parts, act_parts, obs_idx, rew, term, trunc, ep_col, step, who = ([] for _ in range(9))
    lengths = []
    offset = 0
    for i, obs, act, *_ in _episode_columns(reader, indices):
        n = 0
        for name in names:
            cols = agent_columns(ma, name, obs, act)
            obs_parts.append(cols.observations)
            act_parts.append(gather(cols.actions, cols.act_rows))
            obs_idx.append(cols.obs_rows + offset)
            offset += _rows(cols.observations)
            rew.append(cols.reward)
            term.append(cols.terminated)
            trunc.append(cols.truncated)
            ep_col.append(np.full(len(cols.reward), i, np.int64))
            step.append(cols.act_rows.astype(np.int64))
            who.append(np.full(len(cols.reward), ma.index(name), np.int64))
            n += len(cols.reward)
        lengths.append(n)
    observations = concat(obs_parts, f"{where} observations")
    rows = _cat(obs_idx, np.int64)
    starts = np.zeros(len(indices) + 1, dtype=np.int64)
    np.cumsum(np.asarray(lengths, np.int64), out=starts[1:])
    return Transitions(obs=gather(observations, rows), next_obs=gather(observations, rows + 1),
                       action=concat(act_parts, f"{where} actions"),
                       reward=_cat(rew, np.float64), terminated=_cat(term, np.bool_),
                       truncated=_cat(trunc, np.bool_), episode=_cat(ep_col, np.int64),
                       step=_cat(step, np.int64), observations=observations,
                       episodes=np.asarray(indices, dtype=np.int64), starts=starts,
                       agent=_cat(who, np.int64))


def _rows(tree: Any) -> int:
    """The number of rows of a space-shaped value."""
    for _, leaf in tree_leaves(tree):
        return len(leaf)
    return 0


def _cat(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

