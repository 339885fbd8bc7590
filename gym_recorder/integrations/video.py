"""Videos of episodes: frames written to mp4 or gif as they come (:class:`VideoWriter`), so that a long episode's video takes bounded memory.

imageio (and imageio-ffmpeg for mp4) are imported only when a video is written; a missing one
raises :class:`~gym_recorder.errors.MissingExtraError` naming the ``video`` extra.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ExportError, require_extra

__all__ = ["VideoWriter", "write_video", "VIDEO_SUFFIXES", "DEFAULT_FPS"]

# Output suffixes VideoWriter understands.
VIDEO_SUFFIXES = (".mp4", ".gif")
# libx264 with the yuv420p pixel format needs even frame sizes; frames are padded up to this.
VIDEO_BLOCK = 2
# Default frame rate when neither the user nor the env says.
DEFAULT_FPS = 30.0


def _pad_even(frame: np.ndarray) -> np.ndarray:
    h, w = frame.shape[:2]
    ph, pw = (-h) % VIDEO_BLOCK, (-w) % VIDEO_BLOCK
    if ph or pw:
        return np.pad(frame, ((0, ph), (0, pw), (0, 0)))
    return frame


class VideoWriter:
    """Writes rgb frames (uint8 H x W x 3, all of one size) to an ``.mp4`` or ``.gif`` file as
    they come.

    mp4 is H.264 (ffmpeg via imageio-ffmpeg, yuv420p) with frames padded to even sizes, one
    video frame per frame given, each handed to ffmpeg at once: memory stays bounded however
    many frames. gif is written by Pillow at :meth:`close` (it holds the frames until then), and
    stores a frame identical to the one before it as a longer duration of that one, so the
    timing is kept but the file can hold fewer frames than given. A file whose writing failed
    is removed.

    Args:
        path: the output file; its suffix (:data:`VIDEO_SUFFIXES`) picks the format.
        fps: frames per second; None: the ``fps`` given with the first frame, else
            :data:`DEFAULT_FPS`.
        on_frame: called with the number of frames written so far after each (progress).

    Raises:
        MissingExtraError: if imageio (or, for mp4, imageio-ffmpeg) is not installed.
        ExportError: for an unknown suffix or an fps that is not positive.
    """

    def __init__(self, path: str | os.PathLike[str], *, fps: float | None = None,
                 on_frame: Callable[[int], None] | None = None) -> None:
        self.path = os.fspath(path)
        self.suffix = os.path.splitext(self.path)[1].lower()
        if self.suffix not in VIDEO_SUFFIXES:
            raise ExportError(f"{self.path}: unknown video type {self.suffix!r}; use one of "
                              f"{', '.join(VIDEO_SUFFIXES)}")
        if fps is not None and not fps > 0:
            raise ExportError(f"fps must be positive, got {fps}")
        require_extra("imageio", "video")
        if self.suffix == ".mp4":
            require_extra("imageio_ffmpeg", "video")
        self.fps = fps
        self.count = 0
        self._on_frame = on_frame
        self._shape: tuple[int, ...] | None = None
        self._held: list[np.ndarray] = []  # (gif only)
        self._writer: Any = None
        self._created = False

    def append(self, frame: Any, fps: float | None = None) -> None:
        """Writes one frame; ``fps`` (the env's render_fps) sets the rate if none was given.

        Raises:
            ExportError: if the frame is not uint8 H x W x 3 of the first frame's size.
        """
        f = np.asarray(frame)
        if self._shape is None:
            self._shape = f.shape
            if self.fps is None:
                self.fps = fps if fps is not None and fps > 0 else DEFAULT_FPS
        shape = self._shape
        if f.dtype != np.uint8 or f.ndim != 3 or f.shape[-1] != 3 or f.shape != shape:
            self.abort()
            raise ExportError(f"frame {self.count}: {f.dtype} {f.shape}, expected uint8 "
                              f"{shape[:2]} x 3")
        if self.suffix == ".gif":
            self._held.append(f.copy())
        else:
            if self._writer is None:
                import imageio.v2 as iio2

                self._created = True
                self._writer = iio2.get_writer(self.path, format="FFMPEG", mode="I",
                                               fps=self.fps, codec="libx264",
                                               pixelformat="yuv420p", macro_block_size=1)
            try:
                self._writer.append_data(_pad_even(f))
            except BaseException:
                self.abort()
                raise
        self.count += 1
        if self._on_frame is not None:
            self._on_frame(self.count)

    def close(self) -> int:
        """Finishes the file; returns the number of frames it holds.

        Raises:
            ExportError: if no frame was given.
        """
        if not self.count:
            self.abort()
            raise ExportError("no frames to write")
        if self.suffix == ".gif":
            import imageio.v3 as iio

            iio.imwrite(self.path, np.stack(self._held), extension=".gif",
                        duration=1000.0 / float(self.fps or DEFAULT_FPS), loop=0)
            self._held = []
            from PIL import Image  # imageio's gif writer is Pillow

            with Image.open(self.path) as im:
                return int(getattr(im, "n_frames", 1))
        self._writer.close()
        self._writer = None
        return self.count

    def abort(self) -> None:
        """Drops what was written: a broken video is not left behind."""
        self._held = []
        if self._writer is not None:
            try:
                self._writer.close()
            except Exception:  # noqa: BLE001  (already failing: the first error is the one)
                pass
            self._writer = None
        if self._created and os.path.exists(self.path):
            os.remove(self.path)


def write_video(frames: Any, path: str | os.PathLike[str], *, fps: float = DEFAULT_FPS,
                on_frame: Callable[[int], None] | None = None) -> int:
    """Writes rgb frames (uint8 H x W x 3 each, any iterable: taken one at a time) to an
    ``.mp4`` or ``.gif`` file, as :class:`VideoWriter` does.

    Returns:
        The number of frames the file holds.

    Raises:
        MissingExtraError: if imageio (or, for mp4, imageio-ffmpeg) is not installed.
        ExportError: for an unknown suffix, no frames, or frames that are not rgb images.
    """
    if not fps > 0:
        raise ExportError(f"fps must be positive, got {fps}")
    writer = VideoWriter(path, fps=fps, on_frame=on_frame)
    for f in frames:
        writer.append(f)
    return writer.close()
