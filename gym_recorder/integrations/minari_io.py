"""Minari datasets in and out (needs ``gymnasium-recorder[minari]``: minari[hdf5] and pillow).

:func:`export_minari` turns a recording into a Minari dataset with Minari's own
``create_dataset_from_buffers`` (raw arrays: ``jpeg_encoding=False`` where the installed Minari
has that option, so images stay lossless), keeping spaces, the env spec, reset seeds and options,
and the infos Minari can hold (the result names the keys left out, and why). The dataset goes
into Minari's root (``MINARI_DATASETS_PATH``, else ``~/.minari/datasets``): it is written under a
temporary root inside it and moved into place at the end.

:func:`import_minari` reads every episode of a Minari dataset (an id in the local root, or the
path of a dataset's folder, the one holding ``data/``) into a new recording, bit-exact: the
arrays Minari gives back are replayed through a :class:`~gym_recorder.RecordingWrapper`, so the
recording holds exactly them, with the seeds, options and infos.

The work is in :mod:`.minari_export`, :mod:`.minari_import`, :mod:`.minari_env` (the env an
export gets) and :mod:`.minari_fit` (what of a recording Minari can hold); this module is the
place both entry points are imported from.
"""

from __future__ import annotations

from .minari_env import import_env_module
from .minari_export import export_minari
from .minari_import import import_minari

__all__ = ["export_minari", "import_minari", "import_env_module"]
