"""The Hugging Face dataset card (``README.md``) of a Parquet export: :func:`dataset_card`.

A YAML header (license, tags, the ``data/*.parquet`` config), then the env, the recording's
provenance metadata, figures of its episodes, the columns with their types and row shapes, and
a loading example that decodes the image columns.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from .._version import __version__

__all__ = ["METADATA_NAME", "dataset_card"]

METADATA_NAME = "gym_recorder.json"


def _metadata_section(metadata: Any) -> list[str]:
    """The card's lines for the recording's metadata (who or what produced it), if any."""
    if not metadata:
        return []
    lines = ["## Provenance", ""]
    for key, value in metadata.items():
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        lines.append(f"- {key}: {' '.join(text.split())}")  # (one line each, whatever it holds)
    return lines + [""]


def _ident(name: str) -> str:
    """A Python name for a column in the card's example."""
    out = "".join(c if c.isalnum() else "_" for c in name)
    return out if out.isidentifier() else f"col_{out}"


def dataset_card(meta: dict[str, Any], files: int) -> str:
    """The card's text for an export's metadata (what ``gym_recorder.json`` holds) and its
    number of files."""
    env = meta["env_id"] or "an unnamed environment"
    eps = [e for e in meta["episodes"] if e["length"]]  # an empty episode has no return
    empty = len(meta["episodes"]) - len(eps)
    returns = np.array([e["return"] for e in eps if e["return"] is not None], dtype=float)
    ends: dict[str, int] = {}
    for e in eps:
        ends[str(e["end"])] = ends.get(str(e["end"]), 0) + 1
    seeds = sorted({e["seed"] for e in eps if e["seed"] is not None})
    tag = (meta["env_id"] or "").replace("/", "-")
    lines = ["---", "license: other", "task_categories:", "- reinforcement-learning",
             "tags:", "- gym_recorder", "- gymnasium", "- offline-rl"]
    if tag:
        lines.append(f"- {json.dumps(tag)}")
    lines += ["configs:", "- config_name: default", "  data_files:", "  - split: train",
              "    path: data/*.parquet", "---", "",
              f"# {env}, recorded with gym_recorder", "",
              f"{len(eps)} episodes, {meta['steps']} steps of `{env}`, one row per step, in "
              f"{files} Parquet file{'s' if files != 1 else ''} under `data/`. Exported by "
              f"gym_recorder {__version__} from a recording made with gym_recorder "
              f"{meta['recorder'] or 'unknown'}.", "",
              *_metadata_section(meta.get("metadata")),
              "## Environment", "",
              f"- env id: `{meta['env_id']}`",
              f"- env spec: `{json.dumps(meta['env_spec'])}`",
              f"- observation space: `{meta['observation_space_str']}`",
              f"- action space: `{meta['action_space_str']}`", "",
              "## Episodes", "",
              f"- episodes: {len(eps)}, steps: {meta['steps']}"]
    if empty:
        lines[-1] += (f" ({empty} more episode{'s' if empty != 1 else ''} of 0 steps, a reset "
                      f"with no step after it, left out of these figures)")
    if returns.size:
        lines.append(f"- return: mean {returns.mean():.6g}, min {returns.min():.6g}, "
                     f"max {returns.max():.6g}")
    lines.append("- how episodes ended: " + ", ".join(f"{k} {v}" for k, v in sorted(ends.items())))
    lines.append(f"- reset seeds: {', '.join(map(str, seeds[:20])) or 'none'}"
                 f"{' ...' if len(seeds) > 20 else ''}")
    lines += ["", "## Columns", "", "| column | type | row shape |", "|---|---|---|"]
    for name, c in meta["columns"].items():
        lines.append(f"| `{name}` | {c['dtype']} | {tuple(c['shape'])} |")
    lines += ["", "`obs` is the observation a step was taken from, `next_obs` the one it led "
              "to; `episode` and `step` say where a row comes from. Dict and Tuple leaves are "
              "columns named by their dotted path. `info.KEY` columns hold the numeric infos "
              "each step returned (null where a step has none). Spaces, the episode table and "
              "the infos left out are in "
              f"`{METADATA_NAME}`. Columns of rows with 2 or more dimensions (images) hold "
              "each row's bytes (C order, little-endian): the table gives their dtype and row "
              "shape.", "", "## Loading", "", "```python",
              "import numpy as np",
              "import pyarrow.dataset as ds",
              'table = ds.dataset("data", format="parquet").to_table()',
              "# or: datasets.load_dataset(\"parquet\", data_dir=\"data\")",
              *[f"{_ident(name)} = np.frombuffer(table.column({name!r}).combine_chunks()"
                f".buffers()[1], {np.dtype(c['dtype']).name!r}).reshape(-1, "
                f"*{tuple(c['shape'])})"
                for name, c in meta["columns"].items() if len(c["shape"]) >= 2][:3],
              "```", ""]
    return "\n".join(lines)
