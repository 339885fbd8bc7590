"""Editing a recording in place: delete, keep and restore episodes, merge, split, compact.

Data files never change and a writer's manifest is never rewritten by an edit (its writer may
still be recording): every edit commits one small, immutable generation of the recording's
edit log (``_edits.NNNNNNNNN.json``, see "Edits" in :mod:`gym_recorder.format`), which every
reader applies where it lists the writers' episodes (:func:`gym_recorder.read.manifest.load_manifests`).
The way an edit goes: ``select`` (indices, ranges, ``--where``) -> ``episodes`` (stable ids:
writer and number) -> ``log`` (the commit: link the next generation). ``merge`` and ``split``
build recordings of hard links (``copies``), ``compact`` rewrites batches without the deleted
episodes' bytes (``rewrite``; ``join``: an episode's consecutive parts joined into one entry)
and swaps them in with one commit. ``health`` is what ``verify`` and ``repair`` do about the
edit record.
"""

from .compact import RETIRE_GRACE_SECONDS, CompactResult, compact, reclaimable
from .copies import MergeResult, merge, split
from .episodes import (DeletedEpisode, EditResult, delete, delete_ids, deleted_episodes, keep,
                       restore)
from .log import KEEP_GENERATIONS, current_state

__all__ = ["delete", "delete_ids", "keep", "restore", "deleted_episodes", "merge", "split",
           "compact", "reclaimable", "EditResult", "DeletedEpisode", "MergeResult",
           "CompactResult", "current_state", "KEEP_GENERATIONS", "RETIRE_GRACE_SECONDS"]
