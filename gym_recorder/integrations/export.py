"""Turning a recording into other things: a summary, a flat ``.npz``, a plot (videos:
:mod:`gym_recorder.integrations.video`).

Everything here reads a recording with :class:`~gym_recorder.RecordingReader`. Optional libraries
(matplotlib for :func:`plot_returns`, imageio for :func:`write_video`) are imported only by the
function that needs them; a missing one raises :class:`MissingExtraError` naming the extra to
install.

The summary is :mod:`.summary`'s, the ``.npz`` :mod:`.npz`'s and the video :mod:`.video`'s; their
names stay importable from here, where the plot of returns lives.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

# (ExportError and MissingExtraError live in errors; they stay importable from here.)
from ..errors import ExportError, MissingExtraError, require_extra
from .npz import export_npz, flatten_tree
from .summary import summarize
# (the video part lives in .video; its names stay importable from here)
from .video import DEFAULT_FPS, VIDEO_SUFFIXES, VideoWriter, write_video

__all__ = [
    "ExportError",
    "MissingExtraError",
    "summarize",
    "export_npz",
    "flatten_tree",
    "image_leaves",
    "plot_returns",
    "write_video",
    "VideoWriter",
    "VIDEO_SUFFIXES",
    "DEFAULT_FPS",
]

# Default plot size in pixels (width, height) and resolution.
DEFAULT_PLOT_SIZE = (1000, 600)
DEFAULT_PLOT_DPI = 100


# -- plot ----------------------------------------------------------------------------------------

def plot_returns(summary: dict[str, Any], path: str | os.PathLike[str], *,
                 size: tuple[int, int] = DEFAULT_PLOT_SIZE, dpi: int = DEFAULT_PLOT_DPI) -> None:
    """Plots episode return and length over episodes into an image file.

    Two panels share the episode axis: the return of each episode (with a moving average once
    there are enough episodes) and its length in steps. The file type follows the suffix (png,
    svg, pdf, ...); a png is exactly ``size`` pixels.

    Args:
        summary: what :func:`summarize` returned.
        path: the output file.
        size: (width, height) in pixels.
        dpi: dots per inch (with ``size``, sets the figure size in inches).

    Raises:
        MissingExtraError: if matplotlib is not installed.
        ExportError: if the recording has no episodes.
    """
    rows = [r for r in summary["episode_table"] if r["length"]]  # empty ones: no return
    if not rows:
        raise ExportError(f"{summary['directory']}: the recording holds no episodes to plot")
    require_extra("matplotlib", "plot")
    # No pyplot: no global figure state and no GUI backend, just the Agg canvas.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(size[0] / dpi, size[1] / dpi), dpi=dpi)
    FigureCanvasAgg(fig)
    ax_ret, ax_len = fig.subplots(2, 1, sharex=True)
    ids = list(dict.fromkeys(r.get("env_id") for r in rows))
    if len(ids) > 1:  # several envs: one series per env, over the episode index
        for env_id in ids:
            mine = [r for r in rows if r.get("env_id") == env_id]
            x = np.array([r["index"] for r in mine])
            label = env_id if isinstance(env_id, str) else "(no env id)"
            ax_ret.plot(x, [np.nan if r["total_reward"] is None else r["total_reward"] for r in mine],
                        marker="o" if len(mine) <= 50 else None, markersize=3, linewidth=1,
                        label=label)
            ax_len.plot(x, [r["length"] for r in mine], marker="o" if len(mine) <= 50 else None,
                        markersize=3, linewidth=1, label=label)
        ax_ret.legend(loc="best")
        ax_ret.set_ylabel("episode return")
        ax_len.set_ylabel("episode length (steps)")
        ax_len.set_xlabel("episode")
        for ax in (ax_ret, ax_len):
            ax.grid(True, alpha=0.3)
        fig.suptitle(f"{len(ids)} envs: return and length of {len(rows)} episodes "
                     f"({summary['steps']:,} steps)")
        fig.tight_layout()
        fig.savefig(os.fspath(path), dpi=dpi)
        return
    x = np.array([r["index"] for r in rows])
    returns = np.array([np.nan if r["total_reward"] is None else r["total_reward"] for r in rows], float)
    lengths = np.array([r["length"] for r in rows])
    marker = "o" if len(rows) <= 50 else None
    ax_ret.plot(x, returns, marker=marker, markersize=3, linewidth=1, label="return")
    window = max(len(rows) // 20, 1)
    if window > 1:
        kernel = np.ones(window) / window
        ax_ret.plot(x[window - 1:], np.convolve(returns, kernel, mode="valid"), linewidth=2,
                    label=f"moving average of {window} episodes")
        ax_ret.legend(loc="best")
    ax_ret.set_ylabel("episode return")
    ax_ret.grid(True, alpha=0.3)
    ax_len.plot(x, lengths, marker=marker, markersize=3, linewidth=1, color="tab:green")
    ax_len.set_ylabel("episode length (steps)")
    ax_len.set_xlabel("episode")
    ax_len.grid(True, alpha=0.3)
    name = summary.get("env_id") or os.path.basename(os.path.normpath(summary["directory"]))
    fig.suptitle(f"{name}: return and length of {len(rows)} episodes "
                 f"({summary['steps']:,} steps)")
    fig.tight_layout()
    fig.savefig(os.fspath(path), dpi=dpi)


# -- video ---------------------------------------------------------------------------------------

def image_leaves(tree: Any) -> list[tuple[str, np.ndarray]]:
    """The leaves of a stacked observation tree that are image sequences: uint8 (T, H, W, 3).

    Names are ``""`` for a single leaf, else ``key/...`` paths as in :func:`flatten_tree`.
    """
    out = []
    for name, leaf in flatten_tree(tree, ""):
        if isinstance(leaf, np.ndarray) and leaf.dtype == np.uint8 and leaf.ndim == 4 \
                and leaf.shape[-1] == 3:
            out.append((name.lstrip("/"), leaf))
    return out
