"""Writer prefixes: a new writer's file prefix, unique across processes and hosts.

One job: :func:`default_prefix` names a writer that was given no prefix (a time stamp, the
process id, random hex and a per-process counter, checked as the format specification,
:mod:`gym_recorder.format`, asks of a prefix). :mod:`gym_recorder.record.writer` uses it, and so
do writers started elsewhere (``integrations.ray_record``).
"""

from __future__ import annotations

import datetime
import os
import secrets
import threading

from ..format import LEGACY_PREFIX

__all__ = ["default_prefix"]

_counter = 0
_counter_lock = threading.Lock()


def default_prefix() -> str:
    """Returns a new writer prefix, unique across processes and hosts sharing a directory."""
    global _counter
    with _counter_lock:
        _counter += 1
        n = _counter
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    # Kept short: every array reference repeats the .bin name that starts with it.
    return f"{LEGACY_PREFIX}{stamp}.{os.getpid()}.{secrets.token_hex(3)}{n:02d}"
