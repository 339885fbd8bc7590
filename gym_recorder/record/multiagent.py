"""Recording PettingZoo environments: the only place that knows PettingZoo's protocols.

Both wrappers turn what the env returns into rows of the joint spaces of
:func:`gym_recorder.format.agents.joint_spaces` (through :class:`~gym_recorder.record.agent_rows.AgentRows`)
and hand them to the single-agent machinery
(:class:`~gym_recorder.record.buffer.StepBuffer`, :class:`~gym_recorder.record.session.RecordingSession`):
batching, commits, crash safety and the writer are the same as for :class:`RecordingWrapper`.
The layout is specified under "Multi-agent recordings" in :mod:`gym_recorder.format`.

PettingZoo is an optional dependency: ``pip install gym_recorder[pettingzoo]``.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import numpy as np

from ..errors import ResetNeeded
from ..format.agents import OBS_KEY, SELECTION_KEY
from .agent_rows import MISSING, AgentRows, copy_tree
from .session import check_settings
from .wrapper import DEFAULT_FLUSH_INTERVAL, DEFAULT_TARGET_BATCH_BYTES

try:
    from pettingzoo.utils.env import AECEnv, ParallelEnv
    from pettingzoo.utils.wrappers import BaseParallelWrapper, BaseWrapper
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError("recording PettingZoo environments needs pettingzoo: "
                      "pip install 'gym_recorder[pettingzoo]'") from e

__all__ = ["RecordingParallelWrapper", "RecordingAECWrapper"]


# What an AEC env's state is made of; the recorder reads them where they live.
_AEC_STATE = ("agents", "agent_selection", "rewards", "terminations", "truncations", "infos",
              "_cumulative_rewards")


def _state_holder(env: Any) -> Any:
    """The env in a chain of PettingZoo ``BaseWrapper``s that holds the AEC state: the first
    that is not a BaseWrapper forwarding these attributes (read through every wrapper's
    ``__getattr__`` they cost about 40 us a turn). A wrapper that sets one of them on itself,
    or defines it as a property, holds it."""
    while isinstance(env, BaseWrapper) and not any(
            name in vars(env) or isinstance(getattr(type(env), name, None), property)
            for name in _AEC_STATE):
        env = env.env
    return env


class _Common:
    """flush, close and the context manager, shared by both wrappers."""

    _rec: AgentRows
    env: Any
    # AEC: (row, the agent whose observation it waits for, that observation or MISSING, how
    # to record the row), or None
    _pending: tuple[Any, Any, Any, Any] | None = None

    def _start_rows(self, api: str, env: Any, directory: str | os.PathLike[str],
                    file_prefix: str | None, target_batch_bytes: int, record_infos: bool,
                    flush_interval: float | None, fsync: bool, entry_point: str | None,
                    env_kwargs: dict[str, Any] | None, compression: Any,
                    metadata: dict[str, Any] | None) -> None:
        """Checks the settings (before any I/O) and starts the writer of ``api``'s rows."""
        codec, metadata = check_settings(directory, target_batch_bytes, flush_interval,
                                         compression, metadata)
        # (the next class of the wrapper's MRO: PettingZoo's BaseWrapper or BaseParallelWrapper)
        super().__init__(env)  # type: ignore[call-arg]
        self._directory = os.fspath(directory)
        self._rec = AgentRows(self, api, env, directory, file_prefix, target_batch_bytes,
                              record_infos, flush_interval, fsync, entry_point, env_kwargs,
                              codec, metadata)

    def _finish(self) -> None:
        """Records what a wrapper holds back (the AEC wrapper's pending row)."""

    def _renewed(self) -> None:
        """In a process forked from the one that made this wrapper (the session calls it):
        what was buffered is the parent's; steps pass through unrecorded until the next
        reset(), which records into a new writer of the same directory."""
        self._rec.paused = self._rec.started
        self._rec.started = False
        self._pending = None

    @property
    def directory(self) -> str:
        """The recording directory, as given."""
        return self._directory

    @property
    def file_prefix(self) -> str:
        """This writer's file prefix."""
        return self._rec.session.prefix

    def flush(self) -> None:
        """Commits every buffered step now (an open episode continues) and waits for the disk.

        Raises:
            WriteError: if a batch cannot be written; it is kept for the next flush or close.
        """
        self._rec.pending = None
        self._finish()
        self._rec.session.flush(type(self).__name__)

    def close(self) -> None:
        """Ends the open episode (``end == "close"``), writes everything, closes the env.

        Raises:
            WriteError: if something could not be written; calling close() again retries.
        """
        self._rec.pending = None
        closed = self._rec.session.closed
        if not closed:
            self._finish()
        self._rec.session.close()
        if not closed:
            self.env.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: Any) -> Literal[False]:
        self.close()
        return False


_DOC_ARGS = """
    Args:
        env: the PettingZoo environment to record.
        directory: the recording directory (created if missing).
        file_prefix: this writer's file prefix; None picks a unique one.
        target_batch_bytes: aim for batch files of about this many bytes.
        record_infos: record the per-agent info dicts.
        flush_interval: commit buffered steps at least every this many seconds; None: no bound.
        fsync: make every batch durable before committing it.
        entry_point: ``"module:function"`` that makes this env (with ``env_kwargs``), kept in
            the manifest so that ``gym-recorder replay`` can rebuild it.
        env_kwargs: the keyword arguments of ``entry_point`` (JSON values).
        compression: None (raw), ``"zstd"`` or a :class:`~gym_recorder.Zstd` with options, as
            for :class:`~gym_recorder.RecordingWrapper` (image observations: pistonball's).
        metadata: who or what produced the recording, as plain JSON (e.g. ``{"author": ...,
            "policy": "self-play v3"}``): shown by ``info``.
"""


class RecordingParallelWrapper(_Common, BaseParallelWrapper):  # type: ignore[misc]
    __doc__ = """Records every reset and step of a PettingZoo Parallel environment.

    ``reset`` and ``step`` return exactly what the inner env returns. Each step is one row:
    every agent's observation, action, reward, termination and truncation (an agent absent
    from the step's dicts has a filler and a false mask), the live agents (``env.agents``) and
    the infos dict. The episode ends when ``env.agents`` is empty.

    Example:
        >>> from pettingzoo.butterfly import pistonball_v6
        >>> env = RecordingParallelWrapper(pistonball_v6.parallel_env(), tmp_dir)
        >>> obs, infos = env.reset(seed=0)
""" + _DOC_ARGS

    def __init__(self, env: ParallelEnv, directory: str | os.PathLike[str], *,
                 file_prefix: str | None = None,
                 target_batch_bytes: int = DEFAULT_TARGET_BATCH_BYTES,
                 record_infos: bool = True,
                 flush_interval: float | None = DEFAULT_FLUSH_INTERVAL, fsync: bool = False,
                 entry_point: str | None = None, env_kwargs: dict[str, Any] | None = None,
                 compression: Any = None, metadata: dict[str, Any] | None = None) -> None:
        self._start_rows("parallel", env, directory, file_prefix, target_batch_bytes, record_infos,
                         flush_interval, fsync, entry_point, env_kwargs, compression, metadata)

    def reset(self, seed: int | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[Any, Any], dict[Any, Any]]:
        """Resets the env and starts a recorded episode (an open one ends as ``"reset"``)."""
        rec = self._rec
        rec.check("reset()")
        obs, infos = self.env.reset(seed=seed, options=options)
        extra: dict[str, Any] = {}
        row = rec.row(obs, {}, {}, {}, self.env.agents, extra)
        rec.start(row, rec.info(infos, extra), seed, options)
        return obs, infos

    def step(self, actions: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, Any],
                                                     dict[Any, Any], dict[Any, Any],
                                                     dict[Any, Any]]:
        """Steps the env and records the row."""
        rec = self._rec
        rec.check("step()")
        if not rec.started:
            if rec.paused:  # (a forked child: recorded from its next reset)
                return self.env.step(actions)  # type: ignore[no-any-return]
            raise ResetNeeded("call reset() before step() on a RecordingParallelWrapper")
        result = self.env.step(actions)
        obs, rewards, terms, truncs, infos = result
        extra: dict[str, Any] = {}
        act = rec.action_row(actions, extra)
        row = rec.row(obs, rewards, terms, truncs, self.env.agents, extra)
        rec.add(act, row, float(row["rewards"].sum()), not self.env.agents,
                rec.info(infos, extra))
        return result  # type: ignore[no-any-return]


class RecordingAECWrapper(_Common, BaseWrapper):  # type: ignore[misc]
    __doc__ = """Records every reset and turn of a PettingZoo AEC environment.

    ``reset``, ``step``, ``last`` and ``observe`` return exactly what the inner env returns.
    Row 0 is the state after the reset; each turn adds a row: the acting agent's action (None,
    for a finished agent's turn, is recorded as not given), then the state after it: which
    agent acts next and what ``last()`` gives it (its observation, cumulative reward,
    termination, truncation), every agent's step reward (``env.rewards``), cumulative reward,
    terminations, truncations, the live agents and the infos dict. The episode ends when
    ``env.agents`` is empty.

    Example:
        >>> from pettingzoo.classic import tictactoe_v3
        >>> env = RecordingAECWrapper(tictactoe_v3.env(), tmp_dir)
        >>> env.reset(seed=0)
""" + _DOC_ARGS

    def __init__(self, env: AECEnv, directory: str | os.PathLike[str], *,
                 file_prefix: str | None = None,
                 target_batch_bytes: int = DEFAULT_TARGET_BATCH_BYTES,
                 record_infos: bool = True,
                 flush_interval: float | None = DEFAULT_FLUSH_INTERVAL, fsync: bool = False,
                 entry_point: str | None = None, env_kwargs: dict[str, Any] | None = None,
                 compression: Any = None, metadata: dict[str, Any] | None = None) -> None:
        self._start_rows("aec", env, directory, file_prefix, target_batch_bytes, record_infos,
                         flush_interval, fsync, entry_point, env_kwargs, compression, metadata)
        self._state = _state_holder(env)
        self._pending = None

    # A row is complete but for the next agent's observation until that agent observes (the
    # user's last() or observe(): the same call's result is kept, not a second observe()) or
    # the env goes on (step, reset, flush, close: then the recorder observes). That saves an
    # observe() a turn, the larger part of what recording a cheap game costs.

    def _row(self, extra: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
        env = self._state
        agents = env.agents
        selected = env.agent_selection if agents else None
        row = self._rec.row({}, env.rewards, env.terminations, env.truncations, agents, extra)
        row["cumulative_rewards"] = self._rec._vector(env._cumulative_rewards, np.float64,
                                                      extra, "cumulative_rewards")
        row[SELECTION_KEY] = np.int64(self._rec.index.get(selected, -1))
        return row, selected

    def observe(self, agent: Any) -> Any:
        """The inner env's ``observe(agent)``; the recorder keeps a copy when it is the
        observation the pending row waits for."""
        obs = self.env.observe(agent)
        pending = self._pending
        if pending is not None and pending[1] == agent and pending[2] is MISSING:
            self._pending = (pending[0], agent, copy_tree(obs), pending[3])
        return obs

    def _finish(self) -> None:
        """Completes the pending row (observing for it if nobody did) and records it."""
        pending = self._pending
        if pending is None:
            return
        self._pending = None
        row, selected, obs, record = pending
        if selected is not None:
            if obs is MISSING:
                obs = self.env.observe(selected)
            if obs is not None:
                row[OBS_KEY][selected] = obs
                row["observed"][self._rec.index[selected]] = True
        record(row)

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Resets the env and starts a recorded episode (an open one ends as ``"reset"``)."""
        rec = self._rec
        rec.check("reset()")
        self._finish()
        self.env.reset(seed=seed, options=options)
        extra: dict[str, Any] = {}
        row, selected = self._row(extra)
        info = rec.info(self._state.infos, extra)
        self._pending = (row, selected, MISSING,
                         lambda r: rec.start(r, info, seed, options))
        rec.started, rec.paused = True, False
        if selected is None:
            self._finish()

    def step(self, action: Any) -> None:
        """Steps the env for ``agent_selection`` and records the turn."""
        rec = self._rec
        rec.check("step()")
        if not rec.started:
            if rec.paused:  # (a forked child: recorded from its next reset)
                self.env.step(action)
                return
            raise ResetNeeded("call reset() before step() on a RecordingAECWrapper")
        self._finish()
        state = self._state
        agent = state.agent_selection
        self.env.step(action)
        extra: dict[str, Any] = {}
        act = rec.action_row({agent: action}, extra)
        row, selected = self._row(extra)
        info = rec.info(state.infos, extra)
        ended = not state.agents
        total = float(row["rewards"].sum())
        self._pending = (row, selected, MISSING, lambda r: rec.add(act, r, total, ended, info))
        if selected is None:
            self._finish()
