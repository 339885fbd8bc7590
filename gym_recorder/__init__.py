"""gym_recorder: record every Gymnasium interaction to an open, lossless, crash-safe format.

The format is specified in :mod:`gym_recorder.format`.

Where each step of an observation's path lives (one module, one job; an arrow is the way the
data goes; recording and reading meet only in the format's modules):

- The format: ``format`` (the specification and its rules), ``values`` (VALUE encoding; the copy-and-check of a value recorded),
  ``fileio`` (strict JSON, safe opens, CRC-32), ``spaces`` (space descriptions and leaf layout),
  ``errors`` (the named errors).
- Recording: ``wrapper`` (Gymnasium's reset/step protocol) and ``vector`` (vector envs) ->
  ``session`` (when to commit) -> ``buffer`` (columns of steps; ``vector_buffer`` for vector
  envs, on the same base) -> ``batch`` (the buffer-to-encoder contract) -> ``batchqueue`` (to the
  writer thread) -> ``encode`` (pure: a batch's .bin bytes and .json text) -> ``writer`` (the
  thread, retries, fsync, then the manifest); ``envspec`` (the env's spec).
- Reading: ``storage`` (local or remote bytes) -> ``manifest`` (writers and their batches) ->
  ``decode`` and ``columns`` (a batch checked and decoded; ``outside``: leaves stored outside
  their space) -> ``assemble`` (episode parts into episodes, whole-recording columns and
  summaries; ``rows``: rows of an episode read alone; ``stepindex``: the step columns of many
  episodes through the batches' indexes, without their JSON) -> ``reader``
  (``RecordingReader``; ``batchcache``: the parsed batches it keeps),
  ``episode`` (what it hands out), ``legacy``
  (gym-recording files), ``envgroups``, ``batches`` (batch by batch, an episode's parts);
  ``integrity`` (verify and repair, with ``_checks``, ``_repair``, ``_salvage``).
- Using a recording: ``selection``, ``sampling``, ``transitions``, ``datasets`` (training),
  ``export`` (summary, npz, plot, video), ``parquet``, ``minari_io``, ``cloud``, ``ray`` (with
  ``ray_blocks``: one batch's rows) and ``ray_record``, ``view`` (the browser viewer);
  ``record``, ``replay``, ``vector_replay`` and ``compare`` (record with a policy, replay and
  compare).
- The command line: ``cli`` (parser, ``main``), ``cli_record``, ``cli_inspect``, ``cli_output``.
"""

from ._version import __version__
from .errors import (ChecksumError, FormatError, RecorderError, RecordingClosedError,
                     ResetNeeded, UnsupportedValueError, WriteError)
from .format import FORMAT_VERSION
from .reader import Episode, RecordingReader, scan_recorded_traces
from .wrapper import RecordingWrapper
from .vector import RecordingVectorWrapper

__all__ = [
    "__version__",
    "FORMAT_VERSION",
    "RecordingWrapper",
    "RecordingVectorWrapper",
    "RecordingReader",
    "Episode",
    "scan_recorded_traces",
    "RecorderError",
    "FormatError",
    "ChecksumError",
    "UnsupportedValueError",
    "WriteError",
    "RecordingClosedError",
    "ResetNeeded",
]
