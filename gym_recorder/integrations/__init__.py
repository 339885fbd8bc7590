"""Where recordings go: exports, Parquet, Minari, object storage, Ray, the browser viewer.

One job a module; each optional library is imported lazily, where it is needed.

- ``export``: the entry point of the exports (the plot of returns; ``summary``: ``summarize``,
  ``npz``: ``export_npz``, ``video``: videos of image observations; ``infocolumns``: infos as
  columns, for npz and Parquet).
- ``parquet``: a Hugging Face style Parquet folder (``parquet_card``: its dataset card).
- ``minari_io``: Minari in and out (``minari_export``, ``minari_import``; ``minari_env``: the env
  an export gets, ``minari_fit``: what of a recording Minari can hold).
- ``cloud``: recordings at fsspec URLs (``cloud_fs``: opening a URL, naming its errors;
  ``push``: uploading a recording).
- ``ray``: a recording as a Ray dataset (``ray_blocks``: one read task's block, ``ray_columns``:
  leaves as columns; ``ray_record``: recording from Ray workers).
- ``view``: the viewer's server (``view_handler``: answering one request); the page itself is
  ``viewer/``.
"""
