"""Salvage for repair: the entries of a damaged batch that check out, as a batch of their own.

A batch in which some arrays fail their checks still holds entries (episodes, or parts of one)
whose every array is intact. :func:`salvage_runs` says which entries can be kept (see its
docstring for why continuation parts need care), and :func:`write_batch` copies a run of them
into new batch files named after the run's first entry: the same JSON entries, their arrays
copied byte for byte into a new .bin at new 8-byte-aligned offsets (the checksums still hold).
Both files are written atomically (temporary file, fsync, rename), so a kill leaves either no
file or a whole one; no manifest lists them until repair commits one that does.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from ..format.fileio import atomic_write, dumps
from ..format import ALIGNMENT, batch_stem
from ..format.values import array_refs

__all__ = ["salvage_runs", "write_batch"]


def salvage_runs(entries: list[Any], bad: set[int]) -> list[list[int]]:
    """Groups the positions of the entries to keep into runs of consecutive positions.

    Entry indexes inside a batch are consecutive, so each run becomes one batch. An entry that
    continues an episode of the previous batch is looked for at the start of the next batch; if
    one such continuation is damaged, every entry before it is dropped too, so that the kept
    entries start after a gap and the reader ends that episode where its parts stop, as it does
    for a batch moved aside.

    Args:
        entries: the batch's entries (checked objects).
        bad: positions of the damaged entries.

    Returns:
        Runs of positions, in order; empty when nothing can be kept.
    """
    start = 0
    for pos in sorted(bad):
        if pos < len(entries) and entries[pos].get("part", 0) > 0:
            start = pos + 1
    runs: list[list[int]] = []
    for pos in range(start, len(entries)):
        if pos in bad:
            continue
        if runs and runs[-1][-1] == pos - 1:
            runs[-1].append(pos)
        else:
            runs.append([pos])
    return runs


def write_batch(directory: str, prefix: str, doc: dict[str, Any], run: list[int],
                source_bin: str, keep_offsets: bool = False) -> tuple[str, str]:
    """Writes the entries at positions ``run`` of batch ``doc`` as a new batch.

    With ``keep_offsets`` (a run that takes the damaged batch's own names, so its files replace
    the damaged ones one at a time), every array keeps its offset and the bytes no kept array
    covers are zeroed, the file ending at the last kept array: a repair killed after the new
    .bin replaced the old one, before the .json did, finds the kept entries' arrays intact under
    the old .json and salvages them again.

    Args:
        directory: the recording directory.
        prefix: the writer's prefix.
        doc: the damaged batch's parsed JSON (not modified).
        run: consecutive positions of entries whose arrays all checked out.
        source_bin: the path of the damaged batch's .bin, to copy the arrays from.

    Returns:
        The new batch's .json and .bin file names.

    Raises:
        OSError: if a file cannot be read or written.
    """
    first = doc["first"] + run[0]
    stem = batch_stem(prefix, first)
    json_name, bin_name = stem + ".json", stem + ".bin"
    entries = [copy.deepcopy(doc["episodes"][pos]) for pos in run]
    refs: list[dict[str, Any]] = []
    for entry in entries:
        array_refs(entry, refs)
    chunks: list[bytes] = []
    offset = 0
    fd = os.open(source_bin, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        if keep_offsets:
            # (arrays may share bytes, as the format allows: each is copied to its place)
            end = max((int(r["npyoff"]) + int(r.get("stored", r["size"])) for r in refs
                       if r.get("stored", r["size"])), default=0)
            if end > os.fstat(fd).st_size:
                raise OSError(f"{source_bin}: arrays end at {end}, past the file's end")
            image = bytearray(end)
            for ref in refs:
                size, at = int(ref.get("stored", ref["size"])), int(ref["npyoff"])
                data = os.pread(fd, size, at) if size else b""
                if len(data) != size:
                    raise OSError(f"{source_bin}: {size} bytes at {at} could not be read")
                image[at:at + size] = data
                ref["npyfile"] = bin_name
            chunks, offset, refs = [bytes(image)], end, []
        for ref in refs:
            pad = -offset % ALIGNMENT
            if pad:
                chunks.append(bytes(pad))
                offset += pad
            size = ref.get("stored", ref["size"])  # (a compressed array: its stored bytes)
            data = os.pread(fd, size, ref["npyoff"]) if size else b""
            if len(data) != size:
                raise OSError(f"{source_bin}: {size} bytes at {ref['npyoff']} could not be read")
            chunks.append(data)
            ref["npyfile"], ref["npyoff"] = bin_name, offset
            offset += size
    finally:
        os.close(fd)
    # (A batch index of the source batch says where its arrays were: the new batch has none.)
    new_doc = {**{k: v for k, v in doc.items() if k != "index"}, "first": first,
               "episodes": entries}
    with atomic_write(os.path.join(directory, bin_name)) as f:
        f.writelines(chunks)
    with atomic_write(os.path.join(directory, json_name)) as f:
        f.write(dumps(new_doc))
    return json_name, bin_name
