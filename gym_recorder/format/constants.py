"""The numbers and names the format's specification (:mod:`gym_recorder.format`) fixes: its
name and versions, alignment, the caps a reader holds a file to, file suffixes, how an episode
ends, and the shape of a batch index's table."""

from __future__ import annotations

import re

FORMAT_NAME = "gym_recorder"
# The newest format version this reader reads (2: compressed arrays, see "Compressed arrays",
# and the edit record, see "Edits").
FORMAT_VERSION = 2
# The version a writer writes when it stores no compressed array (version 1 readers read it).
RAW_FORMAT_VERSION = 1
# Every array starts at a multiple of this many bytes: enough for any numpy scalar type up to
# float64/int64, so arrays can be viewed in place. (npy uses 64 for SIMD; 8 is what the card asks.)
ALIGNMENT = 8
# A batch JSON aims at a few MB; 256 MiB leaves room for huge info payloads while refusing a
# file that would exhaust memory when parsed (json.loads needs several times the file size).
MAX_JSON_BYTES = 1 << 28
# A bound on the bytes an entry of a batch JSON takes (each takes far more): a manifest's 'len'
# is at most json_size / MIN_ENTRY_BYTES, so a lie in it fails fast.
MIN_ENTRY_BYTES = 1
# Deeper nesting than this is not produced by any space or info we write; refusing it keeps the
# decoder's recursion bounded on hostile files.
MAX_NESTING = 64
# numpy itself allows 64 dimensions; no recorded array needs more than 32.
MAX_NDIM = 32
# One dimension larger than this is absurd for an on-disk array (2**48 elements).
MAX_DIM = 1 << 48
# A space's shape (Box, MultiDiscrete, MultiBinary) holds at most this many elements (2**32):
# checked on a description before any array of that shape is built (a Box's bounds are bounded
# further, by spaces.MAX_BOX_BOUND_BYTES); real spaces are far smaller (an Atari frame: 100,800).
MAX_SPACE_ELEMENTS = 1 << 32
MANIFEST_SUFFIX = ".manifest.json"
LEGACY_PREFIX = "openaigym.trace."
# A batch index's table: episode, part, steps, flags per entry; flags 1 continues, 2 no_reset.
INDEX_TABLE_WIDTH = 4
INDEX_FLAGS = 3
# The largest padding unit of an index column: the writer's lcm(row bytes, 8) when at most 64.
MAX_INDEX_UNIT = 64

# How an episode ends, on its last entry's "end" (see "Batch" above).
ENDS = ("terminated", "truncated", "reset", "close")
# A batch file of some writer: "<prefix>.ep<9 or more digits>.json" or ".bin".
BATCH_NAME_RE = re.compile(r"(?P<prefix>.+)\.ep(?P<first>[0-9]{9,})\.(?P<ext>json|bin)")
# The non-negative integers every BATCH of a manifest carries besides first, len and episodes.
BATCH_COUNTS = ("json_size", "bin_size", "steps", "json_crc32")
