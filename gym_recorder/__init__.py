"""gym_recorder: record every Gymnasium interaction to an open, lossless, crash-safe format.

The format is specified in :mod:`gym_recorder.format`.
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
