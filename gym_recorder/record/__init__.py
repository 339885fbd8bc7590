"""Recording: an env's steps become committed batches on disk.

The way an observation goes: ``wrapper`` (Gymnasium's reset/step protocol; ``vector`` for vector
envs; ``shell`` what both share: settings, write errors, copies and forks) -> ``session`` (when
to commit) -> ``buffer`` (columns of steps; ``vector_buffer``, ``vector_columns`` and
``vector_rows`` for vector envs; ``columns`` what both share: sizing and the fit rule, widen
else values) -> ``batch`` (the buffer-to-encoder contract) -> ``batchqueue`` (to the writer
thread) -> ``encode`` (pure: a batch's .bin bytes and JSON text; ``binsink``: each array into
the .bin, aligned) -> ``writer`` (the thread and retries) -> ``batchfiles`` (a batch's .bin, then
its .json, then the manifest rewrite that commits it; fsync; ``prefix``: a new writer's unique
file prefix; ``writeback``: which thread writes, and what is left in the page cache);
``writeprocess`` (WRITE_MODE "process": the same writer in a child process, ``writechild``, fed
through shared-memory columns) stands in for ``writer``.
``multiagent`` (PettingZoo's AEC and Parallel protocols, needs the ``pettingzoo`` extra) turns
each turn or step into a row of joint spaces (``agent_rows``: one agent's slots of a row) and
feeds the same session and buffer.
"""
