"""gym_recorder: record every Gymnasium interaction to an open, lossless, crash-safe format.

The format is specified in :mod:`gym_recorder.format`.

Where each step of an observation's path lives: one wing a folder, one job a module; data goes
one way, recording and reading meet only in the format.

- ``format/``: the specification (``format/__init__``'s docstring) and its rules in code:
  ``constants`` (the numbers it fixes), ``names`` (file names), ``refs`` (an array reference's
  checks), ``rules`` (versions, a manifest's BATCH, an ENTRY's flags, the batch INDEX); ``spaces`` (space
  descriptions) and ``layout`` (their tree of leaves), ``values`` (VALUE encoding), ``fileio``
  (strict JSON, safe opens, atomic writes, CRC-32), ``envspec`` (the env's spec kept in a
  recording), ``specjson`` (its kwargs as JSON), ``rebuild`` (the env made again from it);
  ``dtypes`` (accepted dtype strings, how a leaf's dtypes join), ``codecs`` (compressed arrays,
  with ``_zstd``, its binding), ``edits`` (the edit record's rules), ``agents`` (multi-agent
  spaces and manifests); ``errors`` (top level: the named errors).
- ``record/``: an env's steps into committed batches (wrapper -> session -> buffer -> encode ->
  writer).
- ``read/``: files into checked arrays and episodes (storage -> manifest -> decode -> assemble ->
  reader).
- ``integrity/``: ``verify`` and ``repair``.
- ``edit/``: edits in place as metadata commits: delete, keep, restore (``episodes``,
  ``select``, ``log``), merge and split (``copies``), compact (``compact``, ``rewrite``);
  ``health`` is what verify and repair do about the edit record.
- ``training/``: selections, transitions, sampling, datasets.
- ``replay/``: drive an env with a policy, replay a recording, compare exactly.
- ``play/``: a person plays an env with the keyboard; the episodes kept are recorded (pygame).
- ``integrations/``: export, Parquet, Minari, cloud, Ray, the browser viewer.
- ``cli/``: the ``gym-recorder`` command line (parser and ``main``; ``record``, ``inspect``,
  ``play``, ``edit``, ``output``).
"""

from ._version import __version__
from .errors import (ChecksumError, CodecUnavailableError, FormatError, RecorderError,
                     RecordingClosedError, ResetNeeded, UnsupportedValueError, WriteError)
from .format import FORMAT_VERSION
from .format.codecs import Zstd
from .read.reader import Episode, RecordingReader, scan_recorded_traces
from .record.wrapper import RecordingWrapper
from .record.vector import RecordingVectorWrapper

# The PettingZoo wrappers need the optional pettingzoo package: imported on first use.
_MULTIAGENT = ("RecordingParallelWrapper", "RecordingAECWrapper")


def __getattr__(name: str) -> object:
    if name in _MULTIAGENT:
        from .record import multiagent

        return getattr(multiagent, name)
    raise AttributeError(f"module 'gym_recorder' has no attribute {name!r}")


__all__ = [
    "__version__",
    "FORMAT_VERSION",
    "RecordingWrapper",
    "RecordingVectorWrapper",
    "Zstd",
    "RecordingParallelWrapper",
    "RecordingAECWrapper",
    "RecordingReader",
    "Episode",
    "scan_recorded_traces",
    "RecorderError",
    "FormatError",
    "ChecksumError",
    "CodecUnavailableError",
    "UnsupportedValueError",
    "WriteError",
    "RecordingClosedError",
    "ResetNeeded",
]
