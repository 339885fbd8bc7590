"""Where recordings go: exports, Parquet, Minari, object storage, Ray, the browser viewer.

``export`` (summary, npz, plot, video), ``parquet``, ``minari_io`` (``minari_export``,
``minari_import``, with ``minari_env`` and ``minari_fit``), ``cloud`` (fsspec URLs, with
``cloud_fs``, and ``push``), ``ray`` (with ``ray_blocks`` and ``ray_record``), ``view`` (the viewer's server; the
page itself is ``viewer/``). Each needs an extra and imports it lazily.
"""
