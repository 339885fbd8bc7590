"""Reading: a recording's files become checked arrays and episodes.

The way an observation comes back: ``storage`` (local or remote bytes) -> ``manifest`` (writers
and their batches) -> ``batchfile`` (a batch JSON parsed and checked; ``batchindex``: its
index, checked against the manifest and the JSON) -> ``decode``, ``entries`` and ``columns``
(arrays read and checked, entry by entry or a batch's columns at once; ``outside``: leaves
stored outside their space) -> ``assemble`` (parts into episodes, and summaries;
``wholecolumn``: whole-recording columns; ``rows``: rows of one episode; ``stepindex``: step
columns through the batches' indexes) -> ``reader`` (:class:`RecordingReader`; ``batchcache``:
the parsed batches it keeps) -> ``episode`` (what it hands out); ``bulk``: the reader's ways
through many episodes at once (columns, step columns, rows of one episode, batch by batch,
summaries). ``legacy`` reads gym-recording files, ``envgroups`` groups episodes by env,
``batches`` walks a recording batch by batch. ``agents`` cuts each agent's
rows out of a multi-agent (PettingZoo) episode (``Episode.agents``).
"""
