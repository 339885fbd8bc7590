"""Reading: a recording's files become checked arrays and episodes.

The way an observation comes back: ``storage`` (local or remote bytes) -> ``manifest`` (writers
and their batches) -> ``batchfile`` (a batch JSON parsed and checked; ``batchindex``: its
index, checked against the manifest and the JSON) -> ``plan`` (one plan per batch: where every
entry's stacked arrays lie, from the index or the JSON's references checked column-wise) ->
``gather`` (rows of planned arrays copied or read into the arrays handed out; ``pages``: large
ones made on recycled pages) -> ``assemble``
(the one builder of an episode, and summaries; ``wholecolumn``: whole-recording columns;
``rows``: rows of one episode; ``stepindex``: step columns of many episodes through the
batches' indexes) -> ``reader`` (:class:`RecordingReader`; ``batchcache``: the parsed batches
it keeps) -> ``episode`` (what it hands out). A batch without a plan (leaves stored as values,
compressed arrays, a reference the plan's checks refuse) is read entry by entry: ``decode``
and ``entries`` (arrays read and checked one entry at a time; ``outside``: leaves stored
outside their space). ``bulk``: the reader's ways through many episodes at once (columns, step
columns, rows of one episode, batch by batch, summaries). ``legacy`` reads gym-recording
files, ``envgroups`` groups episodes by env, ``batches`` walks a recording batch by batch (and
iterates its episodes). ``agents`` cuts each agent's rows out of a multi-agent (PettingZoo)
episode (``Episode.agents``).
"""
