"""The gym_recorder on-disk format, version 2: the specification, and its rules in code.

This docstring is the specification; this package's modules hold its rules, once each:
:mod:`~gym_recorder.format.constants` (the numbers and names it fixes),
:mod:`~gym_recorder.format.names` (file names and prefixes), :mod:`~gym_recorder.format.dtypes`
(dtype strings), :mod:`~gym_recorder.format.refs` (validating an array reference:
:func:`parse_ref`), :mod:`~gym_recorder.format.rules` (the format and version check, a manifest's
BATCH, an entry's flags and end, the batch INDEX) and :mod:`~gym_recorder.format.codecs`
(compressed arrays); every name is importable from here. Two modules carry out the parts of the
specification that are encodings rather than rules: :mod:`gym_recorder.format.values` (VALUEs) and
:mod:`gym_recorder.format.fileio` (strict JSON, safe opens, CRC-32). The writer
(:mod:`gym_recorder.record.writer`) and the reader (:mod:`gym_recorder.read.reader`) meet only in
this package. The format version is independent of the package version. The key words MUST, MUST NOT,
SHOULD and MAY are used as in RFC 2119.

Overview
========
A *recording* is one directory. Any number of *writers* (one per :class:`RecordingWrapper`, in any
number of processes or hosts) write into it at once; each writer owns the files that start with its
*prefix* ``P``. A prefix MUST match ``[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}``. The default prefix is
``openaigym.trace.<UTC time yyyymmddTHHMMSS>.<pid>.<6 random hex digits><2-digit counter>``, unique per writer;
it begins like OpenAI gym-recording's prefixes so that gym-recording's own reader finds our files.

A writer's files::

    P.manifest.json           the commit point: lists the writer's complete batches
    P.epNNNNNNNNN.json        one batch: the episodes (or episode parts) it holds, as JSON
    P.epNNNNNNNNN.bin         the raw bytes of every array of that batch

``NNNNNNNNN`` is the zero-padded, 9-digit (or longer once past 999,999,999) index of the batch's
first *entry* (see "Batch": an entry is an episode or a part of one). Any other file in the directory (temporary files, batch
files that no manifest lists, sub-directories) MUST be ignored by readers. Every regular file
whose name ends in ``.manifest.json`` is a writer's manifest, its P the rest of the name; a
reader MAY refuse one whose P does not match the prefix rule (gym_recorder's reads it). A
manifest that is a symbolic link is ignored by gym_recorder's reader; a batch file that is one,
or any other file that is not a regular file, is refused (readers MAY do either).

JSON
====
All JSON files are UTF-8 (no byte order mark), strict RFC 8259 JSON: no NaN or Infinity literals.
A reader SHOULD refuse a file larger than :data:`MAX_JSON_BYTES` (2**28 bytes, 256 MiB) without
parsing it. Keys an object has twice are not written; a reader MAY take either value.

Nesting: :data:`MAX_NESTING` (64) bounds the depth of each VALUE and of each SPACE, not the file's:
the top of an info value, a reset option, a values row or a space is at depth 0, and each JSON
list or object, ``"tuple"``/``"dict"`` item, ``"scalar"`` array and ``"graph"`` field (for spaces:
each Dict/Tuple/OneOf member, Sequence ``space``, Graph node/edge space) adds one. A writer MUST
refuse to store a deeper value (:class:`~gym_recorder.UnsupportedValueError`); a reader MUST refuse
one. The file nests deeper than its VALUEs (an info value sits about 8 levels down in a batch),
and a reader MAY refuse a file nested deeper than its JSON parser allows (gym_recorder's refuses
about 1000 levels, jansson 2048; what this writer writes stays far below both).

Numbers: a Python ``int`` is written as a JSON integer token (digits, optional minus, no fraction,
no exponent) of any size; a Python ``float`` always with a fraction or an exponent (Python's
``repr``: ``1.0``, ``1e+20``, ``5e-324``), and only finite ones (others are ``{"__type": "float"}``
VALUEs). A reader tells them apart by the token: an integer token is an int, any other number an
IEEE-754 double. Every integer the format itself uses (sizes, offsets, counts, indices, CRCs,
dimensions, ``episode``, ``part``, ``sub_env``) fits in a signed 64-bit integer; integers beyond
64 bits occur only where Python ints are recorded (VALUEs, ``seed``). A reader that cannot
represent such an integer MAY refuse the file, naming it (the C reader does).

Manifest (``P.manifest.json``)
==============================
An object with these keys (more keys MAY be added; readers MUST ignore keys they do not know)::

    "format": "gym_recorder"            MUST be present
    "version": 1 or 2                     the format version; readers MUST refuse larger versions.
                                          A writer writes 2 when its batches may hold
                                          compressed arrays (see "Compressed arrays"), and 1
                                          otherwise, so that version 1 readers read what does
                                          not need version 2; ``gym-recorder compress`` and
                                          ``decompress`` set it the same way; a compaction's
                                          manifests are 2 (see "Edits"); and a
                                          multi-agent recording's are 2 (see "Multi-agent
                                          recordings")
    "prefix": "P"                         MUST equal the P of the file's name; readers MUST refuse
                                          another
    "created": "2026-12-02T16:42:38.123456Z"   UTC, when the writer started
    "writer": {"library": ..., "library_version": ..., "hostname": ..., "pid": ...}
    "env_id": "CartPole-v1" or null      the id of the env's spec, when it has one
    "env_spec": {...} or null             the env's spec: "id", "kwargs", "max_episode_steps", and
                                          (newer writers; readers MUST NOT require them) the
                                          rest of gymnasium's EnvSpec.to_json() with
                                          "additional_wrappers" [{"name", "entry_point", "kwargs"
                                          (null: not recordable), "missing_kwargs" (optional)}],
                                          "missing_kwargs" {name: repr} for kwargs JSON cannot
                                          hold, "module" (the entry point's module), "imports"
                                          (modules the recording process imported for the env);
                                          a vector writer's also "vector_wrappers" [{"name",
                                          "entry_point", "kwargs" (null: not recorded),
                                          "missing_kwargs" (optional)}]: the vector wrappers
                                          between the env the spec describes and the recorder,
                                          innermost first (the spec does not show them).
                                          A vector env without a spec of its own (Sync- or
                                          AsyncVectorEnv built from env functions) records
                                          its sub-envs' spec when they all have the same one,
                                          with kwargs "vectorization_mode" "sync" / "async"
                                          added, as gymnasium.make_vec's spec has it.
                                          Kwargs (the env's and the wrappers') MAY hold
                                          {"__numpy__": DTYPE, "shape", "value"} (kinds b, i, u,
                                          f; "value" is numpy's tolist(), finite numbers only;
                                          shape [] is a numpy scalar), {"__space__": SPACE}
                                          for numpy values and spaces, {"__dtype__": DTYPE,
                                          "type": bool} for a numpy dtype (true: the scalar
                                          type, e.g. numpy.float64) and {"__tuple__": [...]}
                                          for a tuple; list, dict and tuple items are encoded
                                          the same way
    "observation_space": SPACE, "action_space": SPACE      (see "Spaces")
    "vector": null or {"num_envs": K, "autoreset_mode": "NextStep" | "SameStep" | "Disabled"}
    "action_names": ["NOOP", "FIRE", ...]  optional: for a Discrete action space, one string
                                          per action (action start + i is named by item i),
                                          as the env names them (ALE's get_action_meanings());
                                          absent when the env gives none. Only for showing
                                          actions: readers MUST NOT require it
    "metadata": {...}                     optional: who or what produced the recording, as the
                                          user gave it (``RecordingWrapper(metadata=...)``,
                                          ``record --meta KEY=VALUE``): an object of plain JSON
                                          (no ``"__type"`` encoding), at most 64 KiB. Keys
                                          Minari knows (``algorithm_name``, ``author``,
                                          ``author_email``, ``code_permalink``,
                                          ``description``) are exported to it. Readers MUST
                                          NOT require it and MUST NOT trust its content
    "batches": [BATCH, ...]                in commit order
    "complete": false | true               true once the writer was closed cleanly

Each BATCH::

    "first": int       the entry index of the batch's first entry; batches follow each other
                       without overlap (first >= the previous batch's first + len). A gap (entries
                       that no batch holds) only arises when ``repair`` moved a broken batch
                       (or the damaged entries of one) aside: an episode whose next part was in the gap ends there (end null)
    "len": int         the number of entries in the batch; len <= json_size <= MAX_JSON_BYTES
                       (an ENTRY takes more than a byte), so readers refuse a larger len up
                       front; legacy manifests: len <= MAX_JSON_BYTES
    "fn": "P.epNNNNNNNNN.json", "bin": "P.epNNNNNNNNN.bin"
    "json_size": int, "bin_size": int     exact sizes of the two files in bytes
    "json_crc32": int                      zlib CRC-32 of the batch JSON file's bytes
    "steps": int                           transitions in the batch
    "episodes": int                        entries that start a new episode (``part`` == 0)
    "index": INDEX                         optional: where each entry's stacked arrays are,
                                           without the batch JSON (see "Batch index")
    "codecs": ["zstd"]                     version 2, present when the batch holds compressed
                                           arrays: the names of their codecs. A reader MUST
                                           refuse a name it does not know (naming it), and
                                           a BATCH with both ``codecs`` and ``index``

The batch JSON MUST hold exactly ``len`` entries, and readers MUST refuse one that does not.
``steps`` and ``episodes`` MUST equal the sums over its entries; a reader MAY take them on trust
and MAY refuse a batch whose entries disagree with them. gym_recorder's counts and finds
episodes through them without reading the batches; when it reads a batch, it refuses one whose
part-0 entries are not ``episodes`` (its episode numbers would shift), and ``verify`` reports
either count that differs.

Batch (``P.epNNNNNNNNN.json``)
==============================
An object: ``{"format": "gym_recorder", "version": 1 or 2, "prefix": P, "first": int,
"episodes": [ENTRY, ...], "index": INDEX, "header": HEADER}``; ``index`` is optional: when the
BATCH has an INDEX, the writer puts the same one here, so that a manifest rebuilt from the batch
files (``repair``) has it too (readers use the manifest's). HEADER repeats the manifest's fields other than
``batches`` and ``complete`` (format, version, prefix, created, writer, env_id, env_spec, spaces,
vector, action_names when present, metadata), so that a lost manifest can be rebuilt from the batch files alone; readers use the
manifest's copy. ``format``, ``prefix`` and ``first`` repeat the manifest's and its
BATCH's; readers MAY ignore them (gym_recorder's does; ``verify`` reports a ``first`` that
differs). A batch's ``version`` is its own: 2 when it holds a compressed ARRAY (see "Compressed
arrays") or its writer is multi-agent, else 1, also under a manifest of version 2 (a
compaction's copy of raw batches); its HEADER's ``version`` is the manifest's. Readers MUST ignore keys of a batch, an ENTRY, INFOS or a COLUMN that they do not
know. When that header is longer than 4096 bytes of JSON (compact: no spaces after ``,`` and
``:``, non-ASCII escaped), only the writer's first
batch (``first`` == 0) holds it whole; later batches leave out each field whose JSON is longer
than 1024 bytes (e.g. a large space), so that a space is described once per writer, not per batch. Each ENTRY is one episode, or one part of an episode::

    "index": int            entry index (first + position in the batch); readers MUST refuse
                            another
    "episode": int          the writer's episode id (parts of one episode share it). Part 0
                            is found by its position among part-0 entries (see below), never
                            by this field; each later part p is the entry of the very next
                            batch whose ``episode`` equals part 0's and whose ``part`` is p
    "part": int             0 for the part that starts with the reset, then 1, 2, ...
    "continues": bool       optional (absent: false); true if a later entry holds more of
                            this episode; readers MUST refuse a value that is not true or false
    "steps": int            N, the transitions in this entry
    "observations": TREE    part 0: N + 1 rows (the reset observation, then one per step);
                            later parts: N rows (one per step)
    "actions": TREE         N rows
    "rewards": ARRAY        float64, shape (N,)
    "terminations": ARRAY   bool, shape (N,)
    "truncations": ARRAY    bool, shape (N,)
    "infos": INFOS          part 0: N + 1 rows (the reset info first); later parts: N rows
    "seed": int or null     the seed passed to reset (null: none passed); part 0 only
    "options": VALUE or null  the options passed to reset; part 0 only
    "end": how the episode ended, on its last entry: "terminated", "truncated",
           "reset" (reset called before the episode ended), "close" (closed before it ended);
           null on entries with "continues": true (readers ignore it there)
    "sub_env": int or null  the index of the sub-environment, for vector envs
    "no_reset": true        optional, on part 0: the episode was stepped on after the previous
                            one ended, without a reset; its first observation is that one's last
                            (readers MUST refuse a value other than true or false)

``continues`` and ``no_reset`` are JSON ``true`` or ``false`` (absent: false); a reader MUST refuse
an entry with any other value there (``1``, ``"yes"``, ``null``, ``1e308``), naming the batch and
the entry, rather than read it as either.

An episode is the concatenation of its entries in entry order, which is the order of the batches
in the manifest and of ``episodes`` inside a batch. Entries of one episode MUST be consecutive in
a writer's entry sequence, except for vector writers, whose sub-environments interleave (join
entries with the same ``episode``). A reader that does not know parts sees each entry as an
episode of its own. Every writer puts the next part of an entry with ``"continues": true`` in
the very next batch.

Every writer numbers episodes in the order they start, so the part-0 entries of batch k are the
episodes numbered from the sum of the earlier batches' ``"episodes"`` on, in order. A vector writer
(manifest ``"vector"`` not null) MAY write a next part of 0 steps (no rows). Its entries are the sub-environments'
episodes: ``"sub_env"`` is the index, ``"seed"`` and ``"options"`` are what that sub-env was reset
with (a vector ``reset(seed=s)`` seeds sub-env i with s + i; autoresets have neither).

Episodes of a recording
-----------------------
A reader lists the episodes of every writer in the directory. Writers are ordered by their
manifest's ``"created"`` string (compared code point by code point; missing or not a string
counts as ``""``), then by prefix; legacy (gym-recording) writers come first, by prefix. Within a
writer, episodes are in the order of their numbers.

A writer's episode k is found through its part-0 entry: the k-th entry with ``"part": 0``,
counting over the listed batches in manifest order (batch b's part-0 entries are the episodes from
the sum of the earlier batches' ``"episodes"`` on). Part p + 1 of an episode is the entry with the
same ``"episode"`` and ``"part": p + 1`` in the batch listed right after the one holding part p
(the last such entry, were there several). When that batch does not hold it:

- if that batch does not directly follow the one before it (its ``first`` is not that one's
  ``first + len``: ``repair`` moved the batches between them aside), the episode ends with part p,
  its ``end`` null;
- otherwise the recording is malformed, and a reader MUST refuse it.

When part p is in the last listed batch, the episode ends there, its ``end`` null (the writer is
still running, or was killed). An entry with ``"part"`` > 0 whose part 0 lies in no listed batch
(``repair`` moved it aside) belongs to no episode: readers skip it.

Batch index (INDEX)
-------------------
For short episodes a batch JSON is larger than the arrays it references, so a reader that wants
only the stacked arrays of many episodes (each observation and action leaf, rewards,
terminations, truncations: training data) spends its time parsing JSON. A BATCH MAY therefore
hold an INDEX, from which those arrays are found with the manifest and the .bin alone::

    {"table": int, "crc32": int, "columns": [[DTYPE, int, int], ...]}

- ``table``: the offset, a multiple of :data:`ALIGNMENT`, in the batch's .bin of an array of
  ``<i8`` and shape ``(len, 4)`` (:data:`INDEX_TABLE_WIDTH`), C order: for each entry of the
  batch, in order, its ``episode``, ``part``, ``steps`` and flags (1: ``continues`` is true;
  2: ``no_reset`` is true; no other bits). ``crc32`` is the CRC-32 of its ``len * 32`` bytes.
  The table's part-0 ``episode`` is the writer's number like the entry's (parts p + 1 are
  found by it, as under "Episodes of a recording"); a reader MUST refuse negative numbers and
  other flag bits, and MAY refuse a table whose ``steps`` or part-0 rows disagree with the
  BATCH's ``steps`` and ``episodes`` (gym_recorder's does).
- ``columns``: one ``[dtype, npyoff, unit]`` per observation leaf (in leaf order: the SPACE's
  leaves depth first, a Dict's in the order of its ``spaces`` list, a Tuple's in list order;
  a space of no leaves, an empty Dict, has no column), per action
  leaf, then for rewards, terminations and truncations, in that order. Entry k's array of a
  column has the column's ``dtype`` (the leaf's dtype in that batch, which may be wider than
  the space's, see "Trees") and shape ``(rows_k, *leaf shape)`` (the leaf shape as "Trees"
  gives it from the manifest's SPACE; ``rows_k``: the
  entry's ``steps``, plus 1 for the observations of a part 0) and starts at
  ``npyoff + sum(ceil(size_j / unit) * unit for j < k)``, ``size_j`` being entry j's array's
  bytes: the column's arrays lie one after another, each padded to a multiple of ``unit``.
  Column 0's ``npyoff`` is 0 and each next column's is where the column before it ends (its
  last array's end, rounded up to a multiple of :data:`ALIGNMENT`): writers lay the stacked
  columns out first, one after another; a reader MAY refuse an INDEX whose columns do not
  (gym_recorder's does, since no CRC-32 covers the manifest's offsets).
  ``table``, ``crc32``, ``npyoff`` and ``unit`` are JSON integer tokens (a reader MUST refuse
  ``8.0``); ``npyoff`` is a multiple of :data:`ALIGNMENT`, ``unit`` a positive one, at most
  :data:`MAX_INDEX_UNIT` (64).

A writer writes an INDEX only for a batch whose every entry has an ARRAY for every leaf (and
the same INDEX in the batch JSON, see "Batch"). ``repair`` keeps a BATCH's INDEX when it checks
out and leaves it out of a BATCH it rebuilds otherwise; the batches it writes anew have none.
Everything an INDEX says MUST equal what the batch JSON says (the entries' keys, their ARRAYs'
dtypes, shapes and offsets); ``verify`` reports any difference. Readers MAY ignore it (the
batch JSON says everything it says). A reader that uses it MUST check it as it checks ARRAYs
(offsets aligned and inside the .bin, dtypes, the table's CRC-32 and values) and refuse a
batch whose INDEX does not check out; gym_recorder's reader makes it the plan of every read of
the batch (:mod:`gym_recorder.read.plan`: each entry's ARRAYs held to it whenever the batch JSON
is parsed, an entry whose ARRAYs differ read from the JSON alone, which names the fault), and
reads the step arrays of many episodes from it without the JSON when every batch it needs has
one and verification is off (:func:`gym_recorder.training.transitions.transitions`,
``reader.column``).

Arrays (ARRAY)
==============
Every array is a reference into the batch's .bin file::

    {"__type": "ndarray", "shape": [int, ...], "order": "C", "dtype": DTYPE,
     "npyfile": "P.epNNNNNNNNN.bin", "npyoff": int, "size": int, "crc32": int}

- ``npyfile`` MUST be the batch's own .bin file (its BATCH's ``bin``), and readers MUST refuse
  another name (legacy files excepted, see "Version history").
- ``npyoff`` MUST be a multiple of :data:`ALIGNMENT` (8), and a reader MUST refuse one that is not
  (legacy files excepted). So a reader that holds a whole .bin at an 8-aligned address (a
  JavaScript ``ArrayBuffer``, ``malloc``, ``mmap``) can view every array in place as a typed array
  of its dtype: the natural alignment of every item size divides 8 (but for the non-portable
  16-byte long double and 32-byte complex of it). A reader MUST NOT assume more: the
  file's size is the manifest's ``bin_size``, which ends exactly at the end of the array that ends
  last (it is not padded to a multiple of 8), and arrays may be empty (``size`` 0) at any aligned
  offset up to the file's end.
- The arrays of a .bin are those its batch JSON references and, when its BATCH has an INDEX,
  the INDEX's table (which this writer writes after every other array). The bytes between one
  array's end and the next array's ``npyoff`` (the padding) MUST be zero, and nothing follows
  the last array. The writer's padding is fewer than 64 bytes, not always
  fewer than 8: where an entry's rows of a column are R bytes each, it starts each entry's array
  of that column at a multiple of lcm(R, 8) when that is at most 64 (so 12-byte rows give 12
  bytes of padding after a 132-byte array). A batch that ``repair`` rebuilt under its own names
  keeps its arrays at their offsets, with the bytes of the entries it dropped zeroed: padding of
  any length. Readers MUST NOT assume a bound on the padding. A reader MAY refuse padding that is not zero, or bytes after
  the last array; gym_recorder's reader does not (``verify`` reports both). Arrays MAY lie in
  the file in any order, and two arrays MAY share bytes (readers MUST accept both): this writer
  writes each column (one leaf, then rewards, ...) for all entries of the batch one after
  another, never two arrays over the same bytes.
- ``size`` MUST equal ``prod(shape) * itemsize`` and ``npyoff + size`` MUST NOT exceed the file.
- ``dtype`` is numpy's ``dtype.str``: byte order (``<``, ``>`` or ``|``), kind, item size,
  e.g. ``<f4``, ``|u1``, ``|b1``, ``<i8``, ``<U7``. Kinds and sizes: ``b1`` (bool, one byte 0 or
  1; a reader MAY refuse other bytes, gym_recorder's ``verify`` does), ``i``/``u`` 1, 2, 4, 8, ``f`` 2, 4, 8 (and 10, 12 or 16: the platform's long double, not
  portable), ``c`` 8, 16 (and 20, 24 or 32), ``U<n>``, ``S<n>`` (n >= 1). Never O or V. ``|``
  is written where byte order does not apply (b1, i1, u1, S).
- Item size: for ``U<n>`` it counts characters, 4 bytes each: UCS-4 code points (at most
  U+10FFFF; a reader MUST refuse larger ones) in the dtype's byte order, padded with NUL code
  points, which numpy strips from the end; ``<U7`` has an item size of 28 bytes. For ``S<n>`` it
  counts bytes. Every other kind's item size is the number in its name.
- Byte order: the observation and action leaves and the step columns are always stored
  little-endian (``<``, or ``|``): a value arriving big-endian is converted into the leaf's dtype.
  Arrays inside VALUEs (infos, options, values leaves) keep the byte order they were recorded with,
  so ``>`` does occur there. A reader MUST accept ``<``, ``|`` and ``>`` on every array but the
  step columns (gym_recorder's reader gives the array in the stored byte order): ``rewards`` MUST
  be ``<f8`` and ``terminations``/``truncations`` ``|b1``, exactly, and readers MUST refuse
  another dtype there. ``=`` and no byte order are never written; a reader MAY refuse them
  (gym_recorder's takes them as ``<``).
- The bytes are the array in C order. Hence, with numpy alone::

      np.fromfile(os.path.join(dir, npyfile), dtype=dtype, count=prod(shape),
                  offset=npyoff).reshape(shape)

  is exactly the recorded array.
- ``crc32`` (zlib CRC-32 of the ``size`` bytes) MAY be absent (OpenAI gym-recording files).

Compressed arrays (version 2)
-----------------------------
An ARRAY with a ``"codec"`` key is stored compressed; the keys above keep their meaning for
the array (``shape``, ``dtype``, ``size`` = ``prod(shape) * itemsize``, the decoded bytes),
and these change or are added::

    "codec": {"name": "zstd", "configuration": {"level": int, "chunk_rows": C, "delta": D}}
    "stored": int       the bytes the array takes in the .bin, at ``npyoff`` (at least 8)
    "crc32": int        zlib CRC-32 of the ``stored`` bytes (so ``verify`` checks a file
                        without decompressing); MUST be present

A reader MUST refuse a codec ``name`` it does not know, naming it (never read the bytes as
raw). A writer with a compressed ARRAY in any batch MUST write a manifest of version 2 and
name the codec in that batch's BATCH ``codecs``, so that readers of version 1 refuse it
instead of reading compressed bytes as raw; a reader MAY refuse a compressed ARRAY under a
manifest of version 1 or a BATCH whose ``codecs`` does not name its codec (gym_recorder's
decodes it by its own ``codec``). The
batch JSON of a batch with a compressed ARRAY says ``"version": 2``, that of one without says 1. ``level`` is the writer's zstd
level (readers ignore it); ``chunk_rows`` C is an int in [1, :data:`codecs.MAX_CHUNK_ROWS`]
(65536); ``delta`` D is ``"none"``, ``"xor"`` or ``"sub"``. ``npyoff`` is a multiple of
:data:`ALIGNMENT`, and ``npyoff + stored`` MUST NOT exceed the file (readers check it as they
check ``npyoff + size`` of a raw ARRAY). A compressed ARRAY has at least one dimension; with
R = ``shape[0]`` rows of B = ``size / R`` bytes each (B = 0 when R = 0), the rows are cut into
N = ceil(R / C) *chunks* of C rows (the last one holds the rest). The ``stored`` bytes are:

1. the *chunk table*: N + 1 little-endian uint64, the offsets, from ``npyoff``, of each
   chunk's first byte and then of the end: ``table[0] = 8 * (N + 1)`` (right after the
   table), strictly ascending, ``table[N] = stored``. Chunk i lies in
   ``[npyoff + table[i], npyoff + table[i + 1])``; rows r are in chunk ``r // C``, so a
   reader reads one row by reading two table items and one chunk.
2. the chunks, in order, each exactly one zstd frame (RFC 8878) whose header holds its
   Frame_Content_Size, decoding to exactly ``rows_i * B`` bytes (``rows_i`` the chunk's
   rows), no bytes after the frame.

The decoded bytes of a chunk are its rows in C order, with delta coding undone: with
``"none"`` they are the rows; with ``"xor"``, row j > 0 of the chunk is stored as the bytewise
XOR of rows j and j - 1; with ``"sub"``, as their bytewise difference modulo 256 (row j minus
row j - 1). Row 0 of each chunk is stored as it is, so chunks decode independently.

Bounds, before any allocation: a reader MUST refuse a table that is not as above, a frame
that declares another content size than ``rows_i * B`` (or none), and one that decodes to
more or fewer bytes or has bytes after it; it SHOULD refuse ``C * B`` above
:data:`codecs.MAX_CHUNK_BYTES` (2**28: the memory one chunk needs; this writer never writes
one) and a chunk declaring more than :data:`codecs.MAX_ZSTD_RATIO` (2**15) times its stored
bytes (no zstd frame decodes to more: a block of at most 128 KiB takes at least 4 bytes), so
that a small hostile file cannot make it allocate more than 32,768 times its size.

> Why per entry? Each entry's array of a column is compressed on its own, so an entry reads
  without its neighbours, and repair, compress and decompress move entries' arrays as they
  are. Why rows in chunks? A random row decodes one chunk, and rows of one chunk share its
  dictionary (stacked frames repeat 3 of their 4 frames).

This writer compresses only observation and action leaves of at least
:data:`codecs.MIN_CODED_ROW_BYTES` (64) bytes a row, and stores an entry's array raw when
compressing would keep more than :data:`codecs.MAX_STORED_FRACTION` (0.9) of its bytes (noise):
a version 2 batch mixes raw and compressed ARRAYs, and step columns, infos and VALUEs are
always raw. It writes no INDEX for a batch with a compressed array. ``np.fromfile`` loads
every ARRAY without a ``"codec"`` key exactly as above; ``gym-recorder decompress DIR``
rewrites a recording with none.

Values (VALUE)
==============
Infos, reset options and leaves of spaces that do not stack (Text, Sequence, Graph, OneOf, unknown
spaces) are stored as VALUEs: JSON null, true/false, numbers and strings stand for themselves
(Python None, bool, int, float, str); a JSON list is a Python list; a JSON object without a
``"__type"`` key is a dict with those string keys. Otherwise an object with ``"__type"``:

- ``"ndarray"``: an ARRAY (above), a numpy array.
- ``"float"``: ``{"value": "nan" | "inf" | "-inf"}``, a non-finite Python float.
- ``"scalar"``: ``{"dtype": DTYPE, "value": V}``, a numpy scalar; V is a JSON number or bool, or a
  string "nan"/"inf"/"-inf", or for complex dtypes a pair [real, imag] of those, or an ARRAY of
  shape ``[]`` and the same DTYPE (written for ``U`` and ``S`` dtypes, and for long double and its
  complex): the scalar is that array's one element. V MUST fit the dtype: for ``i``/``u`` an
  integer token in its range, for ``b1`` true or false, for ``f``/``c`` numbers no larger in
  magnitude than its largest finite value (or the strings); readers MUST refuse another V.
- ``"tuple"``: ``{"items": [VALUE, ...]}``.
- ``"dict"``: ``{"items": [[VALUE, VALUE], ...]}``, a dict with keys that are not all strings, or
  that has a ``"__type"`` key.
- ``"bytes"``: ``{"base64": "..."}``.
- ``"graph"``: ``{"nodes": VALUE, "edges": VALUE, "edge_links": VALUE}``, a gymnasium GraphInstance.

A dict subclass (``collections.OrderedDict``, ``defaultdict``, ...) is written as a dict of its
items in their order: its type (and a ``defaultdict``'s factory) is not kept, and readers give a
plain dict back.

Trees (TREE)
============
Observations and actions follow the space: a Box, Discrete, MultiDiscrete or MultiBinary leaf is
one ARRAY of shape ``(rows, *leaf_shape)`` with the leaf's dtype: Box: its ``shape`` and
``dtype``; Discrete: ``(rows,)`` of its ``dtype`` (``<i8`` unless the space has another),
holding the values the env gave (``start`` included: a space with ``start=-2`` stores -2..n-3),
not indices;
MultiDiscrete: ``nvec``'s shape and its ``dtype``; MultiBinary: ``n`` (an int, or a list: the
shape) and ``|i1``. Readers MUST refuse an ARRAY leaf of another shape. A Dict space is a JSON
object with the Dict's keys; a Tuple space is a JSON list. A
leaf that does not stack is ``{"__type": "values", "values": [VALUE, ...]}`` with one VALUE a row.
Widening, by dtype, per batch: a leaf's column is stored with the space's dtype unless, while the
batch was being filled, a value arrived whose numpy dtype (``np.asarray(value).dtype``) does not
cast to the column's dtype under numpy's "safe" rule (Python ints and bools that fit an integer
dtype excepted): then the whole column of that batch, in every entry of the batch, is stored with
``np.result_type(column dtype, value dtype)``, so that nothing is lost. The rule goes by dtype,
not by value: a float64 ``0.5`` widens a float32 leaf although float32 holds 0.5. When that
dtype would round a value (an int64 or uint64 integer beyond 2**53 meeting a float, or int64
meeting uint64, which gives float64: a uint64 2**63 in an int64 leaf whose other values are
small is stored as float64, exactly), whether the new value or one already in the column, the writer
stores the leaf as values instead (below, as for a value outside the shape), from then on; so
does a value numpy casts "safely" but not exactly (int64 into a float64 column). The next batch
starts again from the space's dtype, so the parts of one episode may differ; a reader gives such
an episode's leaf in ``np.result_type`` of its parts' dtypes when they are all numbers (kinds b,
i, u, f, c), or all U, or all S, and MUST refuse other mixes. A reader MUST NOT round in that
join: when the dtype does not hold every value of the parts exactly (int64 or uint64 integers
beyond 2**53 in one part, a float in another; uint64 beyond 2**63 beside int64), it gives the
leaf as a list of its rows, each in its part's dtype (as for values, below), or refuses the
episode. The same holds for joining one leaf of many episodes.
A value outside the space's shape (a Box leaf of another shape), or one that is not a number (a
string array, None), makes the writer store that
array leaf as ``{"__type": "values", ...}`` (one VALUE a row, each with its own shape and
dtype) in that batch and all later ones of the writer; readers MUST accept either form for array
leaves and give such a leaf back as a list of its rows (also for an episode whose earlier parts
stored it as an ARRAY), except that when every row of the leaf in an episode is an array of one
shape and one dtype (an env whose observations all have another shape than its space says),
gym_recorder's reader gives the episode's rows as one array of those, as for an ARRAY (and
whole-recording columns and transitions join such episodes as arrays when their rows agree).
Text leaves come back as lists of str; Sequence rows as tuples (or arrays when
``stack``); Graph rows as GraphInstance; OneOf rows as ``(index, value)`` tuples.

Infos (INFOS)
=============
``{"rows": R, "keys": [COLUMN, ...]}`` where R is the number of info dicts and each COLUMN is::

    {"key": str, "index": null | ARRAY (int64 row numbers where the key is present, ascending),
     "kind": "array" | "values", "pytype": null | "bool" | "int" | "float",
     "values": ARRAY (when kind == "array": one row per presence) | [VALUE, ...]}

``index`` null means the key is present in every row. A column of kind "array" stacks its values:
``pytype`` says they were Python bools, ints or floats (give back ``.item()``), null says they
were numpy scalars (values of shape ``(n,)``: row i is ``values[i]`` as a numpy scalar of the
column's dtype, not a 0-d array: 0-d arrays are stored in "values" columns) or numpy arrays of
one dtype and shape (values of shape ``(n, ...)``: row i is the array ``values[i]``). ``index``
MUST be ``<i8`` of shape ``(n,)``, strictly ascending, within ``[0, R)``, and ``values`` MUST have
n rows (one list item a presence for kind "values"); readers MUST refuse otherwise. Keys of the
columns are distinct (a reader MAY take either of two).
Key order in each row dict follows the column order.

Spaces (SPACE)
==============
Readers MUST ignore keys of a SPACE they do not know (later versions of this writer may add some).
``{"type": T, ...}`` with T one of ``Box`` (``dtype``, ``shape``, ``low``, ``high``: a number, an
"inf"/"-inf"/"nan" string, or a nested list of those of the Box's shape; they fit the dtype and
``low <= high``; a Box of no elements has ``[]`` whatever its shape, which readers MUST
accept), ``Discrete`` (``n`` >= 1, ``start``, and ``dtype``: the dtype of its leaf's
arrays, ``<i8`` when absent),
``MultiDiscrete`` (``nvec``, ``start``, ``dtype``), ``MultiBinary`` (``n``: an int or a list of
ints), ``Text``
(``min_length``, ``max_length``, and ``charset``: a string, or for a charset of more than 256
characters ``charset_ranges``: ascending, disjoint inclusive code-point ranges
``[[first, last], ...]``; and ``class``, optional, when the recorded space was of another class
whose values are strings, such as minigrid's MissionSpace: this writer then describes it as 0 to
4096 printable ASCII characters, and keeps its values as they were), ``Dict`` (``spaces``: [[key, SPACE], ...]),
``Tuple`` (``spaces``: [SPACE, ...]), ``Sequence`` (``space``, ``stack``), ``Graph``
(``node_space``, ``edge_space``: SPACE or null), ``OneOf`` (``spaces``), or ``unknown``
(``class``, ``repr``): a space the format cannot describe, whose leaves are stored as VALUEs.
A ``shape`` has at most :data:`MAX_NDIM` (32) dimensions of at most :data:`MAX_SPACE_ELEMENTS`
(2**32) elements in all; a reader MAY refuse a larger one.

Edits (format version 2)
========================
A recording MAY carry an *edit record*: the episodes its user deleted (hidden from every
reader, their bytes still in the batches), and the writers a compaction rewrote. Edits never
change a batch file, nor a writer's manifest (its writer may still be recording). Its files::

    _edits.manifest.json      the tripwire: {"format": "gym_recorder", "version": 2,
                              "prefix": "_edits", "batches": [], ...}; written before the
                              first edit, never changed; readers MUST refuse one whose
                              format, prefix or version is another, or whose "batches"
                              is not an empty list
    _edits.NNNNNNNNN.json     generation N of the edit log (9 to 18 digits), immutable

The prefix ``_edits`` is reserved: no writer takes it. The tripwire is named like a manifest so
that a reader of version 1, which reads every ``*.manifest.json`` and refuses a version it does
not know, refuses the recording by that file's name rather than show deleted episodes. A
reader of version 2 does not take it for a writer; it MUST check it and MUST refuse a
recording that has it but no edit log (the log was lost: deleted episodes would show again;
``repair`` says so and removes the tripwire).

The edit state is the generation with the largest N (readers MUST ignore the others; the
newest :data:`gym_recorder.edit.KEEP_GENERATIONS` (16) are kept, an undo history)::

    "format": "gym_recorder", "version": 2, "prefix": "_edits"
    "generation": N                       MUST equal the N of the file's name
    "time": "...Z", "action": "..."       when, and what the edit did (for people)
    "deleted": {P: [[start, stop], ...]}  optional ({}): per writer prefix, half-open ranges of the writer's
                                          episode numbers (see "Episodes of a recording"),
                                          ascending, non-empty, disjoint and not touching
                                          (start > the previous stop);
                                          0 <= start < stop <= 2**63 - 1
    "replaced": {P: Q}                    optional ({}): writer P was rewritten by a compaction as writer Q:
                                          readers ignore P's manifest; Q is not itself a key
    "pending": {P: "..."}                 optional ({}): writers a merge is bringing in: ignored until a
                                          later generation leaves them out of "pending"
    "replaced_at": {P: "...Z"}            optional: when P was replaced (its files are removed
                                          a grace period later); readers MAY ignore it

Readers MUST refuse a generation that breaks these rules, naming the file. A reader applies the
state where it lists the episodes: it leaves out the writers ``replaced`` or ``pending`` name,
and a writer's manifest whose ``"replaces": P`` is not matched by ``"replaced": {P: its
prefix}`` (a compaction killed before it committed); each writer's episodes whose numbers
``deleted`` names are not shown, and the episodes shown are numbered as in a recording
without them (an episode's index after an edit is its position among those shown; its writer
and number stay its stable id, until a compaction rewrites the writer). Ranges MAY name
numbers the writer has not (yet) recorded; readers ignore those.

A generation is written complete to a temporary file, fsynced, and linked to its name (the
commit: atomic, and it fails if another edit took that generation first); generation 0 (no
edits) is written before the tripwire. A compaction writes writer Q's batches and manifest
(``"version": 2``, ``"replaces": P``, ``"created"`` P's, its episodes P's shown ones renumbered
from 0, consecutive parts of an episode possibly joined into one entry, batch INDEXes kept;
compressed ARRAYs copied as stored, never joined, their batches of version 2 with ``codecs``;
its batches' HEADERs carry ``"replaces"`` too, so that a manifest ``repair`` rebuilds from them
stays hidden as well) before the generation that replaces P, and removes P's files only
after that generation (and a grace period: readers that listed P may still read it).

Multi-agent recordings (version 2)
==================================
A recording of a PettingZoo environment (``RecordingParallelWrapper``, ``RecordingAECWrapper``)
is written with ``"version": 2`` in its manifest and batches, and a manifest key::

    "multiagent": {"api": "parallel" | "aec", "agents": [NAME, ...], "env": {...}}

``agents`` are the env's ``possible_agents`` (1 to :data:`agents.MAX_AGENTS` (65536) distinct strings,
in the env's order: the order of every per-agent vector below); ``env`` says what the writer
knew of the env (``"name"``: its metadata name, ``"module"``/``"class"``: its unwrapped class,
``"entry_point"`` ``"module:function"`` and ``"kwargs"`` when the user gave them, else null);
readers MUST NOT require any of its keys. A version 1 manifest MUST NOT have ``"multiagent"``
(readers MUST refuse one that does); a version 2 manifest without it is a single-agent recording
(version 2 also marks compressed arrays and compactions). Everything else is as above:
an episode is one sequence of rows in the single-agent layout, its spaces are Dict spaces built
from the agents' spaces, K being the number of agents::

    observation_space: Dict {
        "observations": Dict {NAME: the agent's observation space, ...},
        "observed": Box bool (K,)       the agent's slot of "observations" holds its value
        "live": Box bool (K,)           the agent is in env.agents
        "rewards": Box float64 (K,)     the step's rewards (Parallel: step()'s dict; AEC:
                                        env.rewards)
        "terminations", "truncations": Box bool (K,)
        AEC only: "cumulative_rewards": Box float64 (K,)   env._cumulative_rewards, what
                                        last() returns as reward
                  "agent_selection": Box int64 ()          the index of env.agent_selection,
                                        the agent to act next; -1 when env.agents is empty }
    action_space: Dict {
        "actions": Dict {NAME: the agent's action space, ...},
        "given": Box bool (K,)          an action was given for the agent (not absent, not None) }

A reader MUST refuse a version 2 manifest whose spaces do not have exactly these keys, these
vector dtypes and shapes, and the agents as the keys of both inner Dicts. Observation row 0 is
the state after ``reset``, row t the state after step (Parallel) or turn (AEC) t; action row t
(0-based) is what led from row t to row t + 1. An agent's slot of a row that has no value for
it holds a filler (zeros, the space's ``start``, null for VALUE leaves) with its mask false;
so do its reward (0.0), termination and truncation (false) when the dicts lack its key.

- Parallel: row t's per-agent values are the dicts ``reset`` (observations, infos) or
  ``step`` returned, ``live`` is ``env.agents`` after the call.
- AEC: row t holds what ``last()`` gives after turn t: ``agent_selection`` and that agent's
  ``observe()`` (the only observation of the row: the other slots are fillers), the
  cumulative rewards, terminations, truncations and ``env.rewards`` of every agent. An action
  of None (a finished agent's turn) is recorded with ``given`` false, never a stale action.
  Turn t + 1's acting agent is row t's ``agent_selection``.

The INFOS row t is the env's per-agent infos dict (``step``/``reset``'s for Parallel,
``env.infos`` for AEC; an infos value that is not a dict is kept as ``{"__infos__": value}``),
with, under ``"__extra__"``, any key of the other dicts that is not an agent of ``agents``
(PettingZoo allows extras such as ``"common"``), by dict: ``{"observations": {key: value},
"rewards": ...}``. The entry's ``rewards``
column is the row's sum of ``rewards``; the episode ends (``terminations``/``truncations``
true) at the row where ``env.agents`` becomes empty: ``"truncated"`` when some agent's last
truncation was true, else ``"terminated"``.

Readers that know only single-agent recordings: a version 1 reader refuses version 2 by its
version check; a reader of version 2 that gives multi-agent recordings no meaning of their own
(an exporter, a viewer) MUST refuse them naming them ("multi-agent recordings are not
supported"), never hand out the joint rows as one agent's.

Commit protocol and durability
==============================
A writer writes the .bin, then the .json of a batch, each to a temporary file in the directory
(``tmp`` and 8 random characters; given the permissions the umask gives, as ``open()`` would) that
is renamed into place, and only then rewrites its manifest
the same way. The manifest is the commit point: a batch not listed in a manifest does not exist.
One manifest rewrite may commit several batches: a written batch waits for it at most
``batchfiles.MIN_COMMIT_INTERVAL`` seconds (0.05), or ``batchfiles.COMMIT_COST_FACTOR`` (20) times as long
as the last rewrite took when that is longer, and behind at most
``batchfiles.MAX_COALESCED_BATCHES`` (16) others. A process killed at any moment therefore leaves
every listed batch complete; it may leave temporary files and complete or partial batch files that no manifest lists, which
readers ignore and ``repair`` moves aside (taking complete ones back into the manifest).

What is fsynced, and when:

- ``fsync=True``: each .bin and .json is fsynced before it is renamed into place, the directory
  after both renames, and the manifest is fsynced before its rename and the directory after it.
  A batch is therefore durable before any manifest on disk lists it: after a power loss the
  recording holds every batch committed before the loss.
- ``fsync=False`` (the default): nothing is fsynced while recording. ``flush()`` and ``close()``
  fsync every file written since the last fsync, then the manifest, then the directory; what was
  committed before the last ``flush()``/``close()`` survives a power loss. Batches committed since
  then may come back missing, truncated or zero-filled while the manifest still lists them (the
  file system may persist the manifest's rename first); the reader then fails on them with a
  named error (with ``verify=True`` also on zero-filled bytes), ``verify`` reports them, and
  ``repair`` moves them aside so that the rest reads.

A killed process (no power loss) never loses a committed batch in either mode: the operating
system writes it out.

Example readers
===============
Besides :mod:`gym_recorder.read.reader`, two readers were written from this specification alone and
serve as examples for other languages: the C library and command-line tool in ``readers/c/``
(``grread list DIR``, ``grread dump DIR [INDEX [FIELD]] [--values]``; JSON through jansson,
compressed arrays through libzstd), run by the test suite over its recordings and hostile files
(``tests/test_c_reader.py``), and the JavaScript decoder of the browser viewer,
``gym_recorder/integrations/viewer/decode.js`` (compressed arrays through the vendored fzstd).
Both read version 2.

Version history
===============
2 (gym_recorder 0.1, later writers), three additions, each used only where it is needed, so
that version 1 readers keep reading everything that does not need version 2 and refuse, by the
version of a manifest, everything that does:

- compressed arrays (ARRAY ``"codec"`` and ``"stored"``, BATCH ``"codecs"``, see "Compressed
  arrays"). Written only by writers that compress (manifest and batch JSON ``"version": 2``; a
  batch without a compressed array says 1); everything else is as in version 1, and a version 2
  reader reads version 1 recordings unchanged.
- the edit record (see "Edits"): ``_edits.manifest.json`` and the edit log. Writers that do not
  compress still write ``"version": 1`` manifests and batches (:data:`RAW_FORMAT_VERSION`),
  which readers of version 1 read while a recording has no edits; a compaction's manifests are
  of version 2 (key ``"replaces"``). Readers of version 1 refuse a recording with edits by the
  tripwire's version.
- multi-agent (PettingZoo) recordings (see "Multi-agent recordings"): manifest and batches of
  version 2 with the ``"multiagent"`` key and the joint spaces; otherwise as version 1.

1 (gym_recorder 0.1): first version. Later writers of version 1 add the optional manifest
(and HEADER) key ``"metadata"`` and the optional ``class`` of a Text SPACE, which readers that do not
know them ignore, and the optional batch INDEX
(manifest BATCH and batch JSON key ``"index"``, its table an array at the end of the .bin);
readers that do not know it ignore the keys, and one that refuses bytes after the last array it
knows of (which the text above allows) refuses such batches. Later writers also add the optional manifest
(and HEADER) key ``"action_names"``; readers that do not know it ignore it. Files without ``"format"``/``"version"`` whose prefix starts
with ``openaigym.trace.`` are read as OpenAI gym-recording ("legacy") recordings: episodes hold
only observations, actions and rewards, observations possibly as one array per step.

Legacy files: the manifest is ``{"batches": [{"first", "len", "fn"}]}`` (no sizes, checksums or
``bin``; ``fn`` MUST be ``P.ep...json`` of the manifest's own prefix P), and a batch
``{"episodes": [{"observations", "actions", "rewards"}]}``, one entry an episode (no parts). Each
of the three is an ARRAY, a list of ARRAYs of one dtype and shape (one per step: stacked), or a
list of JSON numbers and bools (an array of numpy's type for them); gym_recorder's reader also
reads objects of these as dicts and other lists as lists, which a reader MAY refuse. ARRAY
``dtype`` is numpy's ``str(dtype)`` name (``float32``, ``uint8``, ``bool``, ...), ``npyoff`` need not be aligned,
``size`` is present as in any ARRAY (readers MUST refuse one without it), ``crc32`` is absent, and ``npyfile`` may be any plain file name in the directory. gym-recording
wrote an empty list as ``np.array([[]])``: shape ``(1, 0)``, float64; readers give actions of
that shape back as shape ``(0,)``. An episode has N = (rows of observations) - 1 steps (0 if
there is none); rewards are converted to float64 of shape ``(N,)``. What the files lack is made up:
terminations and truncations all false (N each), N + 1 empty info dicts, and ``seed``,
``options``, ``end``, ``sub_env``, ``env_id`` null.
"""

from __future__ import annotations

# The rules in code, one module a subject; every name stays importable from here.
from .codecs import CODEC_NAMES, Codec
from .constants import (ALIGNMENT, BATCH_NAME_RE, ENDS, FORMAT_NAME, FORMAT_VERSION,
                        INDEX_FLAGS, INDEX_TABLE_WIDTH, LEGACY_PREFIX, MANIFEST_SUFFIX, MAX_DIM,
                        MAX_INDEX_UNIT, MAX_JSON_BYTES, MAX_NDIM, MAX_NESTING, MAX_SPACE_ELEMENTS,
                        MIN_ENTRY_BYTES, RAW_FORMAT_VERSION)
from .dtypes import (exact_dtype, exact_in, join_arrays, join_dtype, parse_dtype,
                     rounding_dtypes)
from .names import batch_stem, check_plain_name, check_prefix, manifest_name
from .refs import ArrayRef, parse_ref
from .rules import (IndexColumn, batch_codecs, check_batch_entry, check_flags, check_version,
                    check_version_number, continues, entry_end, is_legacy, parse_batch_index)

__all__ = [
    "FORMAT_NAME",
    "FORMAT_VERSION",
    "RAW_FORMAT_VERSION",
    "CODEC_NAMES",
    "Codec",
    "batch_codecs",
    "ALIGNMENT",
    "MAX_JSON_BYTES",
    "MIN_ENTRY_BYTES",
    "MAX_NESTING",
    "MAX_NDIM",
    "MAX_DIM",
    "MAX_SPACE_ELEMENTS",
    "MANIFEST_SUFFIX",
    "LEGACY_PREFIX",
    "ENDS",
    "BATCH_NAME_RE",
    "is_legacy",
    "check_version",
    "check_version_number",
    "check_batch_entry",
    "continues",
    "check_flags",
    "entry_end",
    "batch_stem",
    "manifest_name",
    "check_prefix",
    "check_plain_name",
    "parse_dtype",
    "ArrayRef",
    "parse_ref",
    "exact_dtype",
    "exact_in",
    "join_dtype",
    "rounding_dtypes",
    "join_arrays",
    "INDEX_TABLE_WIDTH",
    "INDEX_FLAGS",
    "MAX_INDEX_UNIT",
    "IndexColumn",
    "parse_batch_index",
]
