"""The recorder shell both wrappers share: settings, the session, and the policies above it.

:class:`RecorderShell` is what :class:`~gym_recorder.record.wrapper.RecordingWrapper` and
:class:`~gym_recorder.record.vector.RecordingVectorWrapper` have in common: the constructor's
checks, the header and layouts, ``directory`` / ``file_prefix``, ``flush`` / ``close`` / the
context manager, write errors deferred to the next call, and starting over as a new writer after
a copy, a pickle or ``os.fork()``. A wrapper says only how it builds its header and buffer and
how it feeds the buffer (Gymnasium's protocol).

The policies, one for both wrappers:

- A write error met while a ``reset()`` or ``step()`` commits a batch: that call recorded its
  result and returns it; the error is raised by the next ``reset()`` or ``step()``, before it
  touches the env, so the recording and what the caller saw agree. The batch is kept in memory
  and retried by ``flush()`` / ``close()``.
- A copy (``copy.copy``, ``copy.deepcopy``, ``pickle``) or a forked child records into the same
  directory as a new writer (a new prefix) from its next ``reset()``; until then its steps pass
  through unrecorded (warned once). What the original had buffered is the original's to write.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any, Literal, TypedDict

from ..errors import RecorderWarning, RecordingClosedError, ResetNeeded, WriteError
from ..format.spaces import Layout
from .session import RecordingSession

__all__ = ["RecorderShell", "Settings"]


class Settings(TypedDict):
    """A recorder's settings, kept to start a new writer (copy, unpickle, fork)."""

    directory: str
    target_batch_bytes: int
    record_infos: bool
    info_filter: Callable[[dict[str, Any]], dict[str, Any]] | None
    flush_interval: float | None
    fsync: bool
    compression: Any  # a resolved codec (see format.codecs.resolve_compression), or None
    metadata: dict[str, Any] | None  # the manifest's "metadata" (checked), or None


class RecorderShell:
    """The part of a recording wrapper above its buffer (see the module docstring).

    Subclasses define :meth:`_header` and :meth:`_new_buffer`, call :meth:`_start_shell` from
    ``__init__``, and in ``reset()`` / ``step()`` use :attr:`_ready` (True: the fast path may
    record), :meth:`_not_ready` (the slow path's checks) and :meth:`_commit_deferring`.
    """

    _name = "recorder"  # the class name, for messages
    _ready: bool
    _buffer: Any
    _session: RecordingSession
    _settings: Settings

    # -- what a wrapper defines --------------------------------------------------------------

    def _header(self) -> dict[str, Any]:
        """The manifest fields describing the env (see ``env_header``)."""
        raise NotImplementedError

    def _new_buffer(self, obs_layout: Layout, act_layout: Layout) -> tuple[
            Any, Callable[[str], None]]:
        """A new buffer, and its method that ends every open episode with a reason."""
        raise NotImplementedError

    def _on_restart(self) -> None:
        """Called when the recorder starts (again): the wrapper forgets its protocol state."""

    # -- starting ------------------------------------------------------------------------------

    def _start_shell(self, directory: str | os.PathLike[str], file_prefix: str | None,
                     target_batch_bytes: int, record_infos: bool,
                     info_filter: Callable[[dict[str, Any]], dict[str, Any]] | None,
                     flush_interval: float | None, fsync: bool, compression: Any = None,
                     metadata: dict[str, Any] | None = None) -> None:
        """Keeps the settings (checked by the wrapper before any I/O) and starts the first writer.

        Raises:
            TypeError, ValueError: see :func:`~gym_recorder.record.session.check_options`.
            FileExistsError: if ``file_prefix`` is already used in the directory.
        """
        self._settings = {"directory": os.fspath(directory),
                          "target_batch_bytes": target_batch_bytes, "record_infos": record_infos,
                          "info_filter": info_filter, "flush_interval": flush_interval,
                          "fsync": fsync, "compression": compression, "metadata": metadata}
        self._start_recorder(file_prefix, lazy=False)

    def _start_recorder(self, file_prefix: str | None, lazy: bool) -> None:
        settings = self._settings
        header = self._header()
        if settings.get("metadata"):
            header["metadata"] = settings["metadata"]
        obs_layout = Layout(header["observation_space"])
        act_layout = Layout(header["action_space"])
        self._buffer, end_all = self._new_buffer(obs_layout, act_layout)
        self._directory: str = settings["directory"]
        self._session = RecordingSession(
            self, self._buffer, end_all, self._directory, header, obs_layout, act_layout,
            file_prefix=file_prefix, flush_interval=settings["flush_interval"],
            fsync=settings["fsync"], lazy=lazy, compression=settings.get("compression"))
        self._ready = False
        self._env_closed = False
        self._paused = False  # a copy or forked child: steps pass through until reset()
        self._pending_error: WriteError | None = None  # raised by the next reset() or step()
        self._pending_ready = False
        self._paused_note = ""
        self._on_restart()

    # -- copies and forks ----------------------------------------------------------------------

    def _renewed(self, note: str = "a process forked from the one that made this wrapper") -> None:
        """Called when the recorder starts over (a fork: the session was renewed): it records
        from the next reset()."""
        if self._ready or self._pending_error is not None:
            self._paused = True
            self._paused_note = note
        self._ready = False
        self._pending_error = None
        self._on_restart()

    def _open_episodes(self) -> bool:
        """True while an episode is being recorded (for a copy's warning)."""
        return self._ready

    def __getstate__(self) -> dict[str, Any]:
        """A copy (or pickle) keeps the inner env and the settings, never the writer."""
        state = {k: v for k, v in self.__dict__.items() if k not in ("_session", "_buffer")}
        state["_copied_mid_episode"] = self._open_episodes()
        state["_copied_ready"] = self._ready or self._pending_error is not None
        state["_pending_error"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """The copy records into the same directory as a new writer, from its next reset()."""
        mid_episode = state.pop("_copied_mid_episode", False)
        was_ready = state.pop("_copied_ready", False)
        self.__dict__.update(state)
        self._start_recorder(None, lazy=True)
        self._paused = was_ready
        if mid_episode:
            self._paused_note = "a copy made mid-episode"

    # -- properties ------------------------------------------------------------------------

    @property
    def directory(self) -> str:
        """The recording directory, as given."""
        return self._directory

    @property
    def file_prefix(self) -> str:
        """This writer's file prefix."""
        return self._session.prefix

    # -- the slow path of reset() and step() ---------------------------------------------------

    def _check_open(self, call: str) -> None:
        """Raises RecordingClosedError after close(), then a deferred write error if any."""
        if self._session.closed:
            raise RecordingClosedError(f"{call}() on a closed {self._name}")
        self._raise_pending()

    def _not_ready(self, reset_needed: str) -> bool:
        """The checks of a step() taken while :attr:`_ready` is False.

        Returns:
            True when the step passes through unrecorded (a copy or a forked child before its
            first reset()).

        Raises:
            RecordingClosedError: after close().
            WriteError: a write error deferred from the previous call.
            ResetNeeded: with ``reset_needed`` as the message, otherwise.
        """
        self._check_open("step")
        if self._paused:
            if self._paused_note:
                warnings.warn(f"{self._name} in {self._paused_note}: its steps are recorded "
                              "from its next reset()", RecorderWarning, stacklevel=3)
                self._paused_note = ""
            return True
        raise ResetNeeded(reset_needed)

    # -- write errors --------------------------------------------------------------------------

    def _commit_deferring(self) -> None:
        """Commits the buffered steps; a write error is kept for the next call (see _defer)."""
        try:
            self._session.commit()
        except WriteError as e:  # the call is recorded: return it, raise at the next call
            self._defer(e)

    def _defer(self, error: WriteError) -> None:
        """Keeps a write error for the next call: the call that met it recorded its result and
        returns it (the recording and what the caller saw agree); the next reset() or step()
        raises it before touching the env, so that nothing is recorded that was not returned."""
        self._pending_error = error
        self._pending_ready = self._ready
        self._ready = False  # (sends the next step() down the slow path)

    def _raise_pending(self) -> None:
        error = self._pending_error
        if error is not None:
            self._pending_error = None
            self._ready = self._pending_ready
            raise error

    def _drop_pending(self) -> None:
        """flush() and close() retry and report write errors themselves."""
        if self._pending_error is not None:
            self._pending_error = None
            self._ready = self._pending_ready

    # -- flush, close, with ------------------------------------------------------------------

    def flush(self) -> None:
        """Commits every buffered step now (open episodes continue) and waits for the disk.

        Raises:
            RecordingClosedError: after close().
            WriteError: if a batch cannot be written; it is kept for the next flush or close.
        """
        self._drop_pending()
        self._session.flush(self._name)

    def _close_recorder(self) -> None:
        """Ends open episodes (``end == "close"``) and writes everything.

        Raises:
            WriteError: if something could not be written; calling close() again retries.
        """
        self._drop_pending()
        self._ready = False
        self._paused = False
        self._session.close()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: Any) -> Literal[False]:
        self.close()  # type: ignore[attr-defined]
        return False  # exceptions propagate
