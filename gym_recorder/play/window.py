"""The play window: the env's ``rgb_array`` frames, zoomed, over a status line (pygame)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from ..errors import PlayError, install_hint

__all__ = ["PlayWindow", "import_pygame", "check_frame", "auto_zoom", "STATUS_HEIGHT"]

# Height of the status strip under the frame, in pixels, and its colours.
STATUS_HEIGHT = 22
_STATUS_BACKGROUND = (24, 24, 24)
_STATUS_TEXT = (235, 235, 235)
# Without --zoom, small frames (Atari's 160 x 210) are scaled by a whole factor up to this width.
AUTO_ZOOM_WIDTH = 480


def import_pygame() -> Any:
    """pygame, imported quietly, or a PlayError saying how to install it."""
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError as e:
        raise PlayError(f"play needs pygame: {install_hint('play')}") from e
    return pygame


def check_frame(frame: Any) -> np.ndarray:
    """The frame ``env.render()`` returned, checked: uint8, height x width x 3.

    Raises:
        PlayError: naming what came back instead.
    """
    if not isinstance(frame, np.ndarray) or frame.dtype != np.uint8 or frame.ndim != 3 \
            or frame.shape[2] != 3 or 0 in frame.shape:
        what = (f"an array of {frame.dtype} and shape {frame.shape}"
                if isinstance(frame, np.ndarray) else type(frame).__name__)
        raise PlayError(f"env.render() must return an rgb_array frame (uint8, height x width "
                        f"x 3), got {what}: make the env with render_mode='rgb_array'")
    return frame


def auto_zoom(frame_width: int) -> float:
    """The zoom used when none is given: 1, or a whole factor bringing a small frame near
    :data:`AUTO_ZOOM_WIDTH` pixels wide."""
    return float(max(1, AUTO_ZOOM_WIDTH // frame_width))


class PlayWindow:
    """A pygame window showing frames of one size, zoomed, with a status line under them.

    Args:
        pygame: the pygame module.
        frame_shape: (height, width) of the env's frames.
        zoom: scale factor of the frames (> 0).
        caption: the window title's first part.
    """

    def __init__(self, pygame: Any, frame_shape: tuple[int, int], zoom: float,
                 caption: str) -> None:
        self.pygame = pygame
        height, width = frame_shape
        self.frame_shape = frame_shape
        self.size = (max(1, round(width * zoom)), max(1, round(height * zoom)))
        self.caption = caption
        pygame.display.init()
        self.surface = pygame.display.set_mode((self.size[0], self.size[1] + STATUS_HEIGHT))
        self.font: Any = None
        try:
            pygame.font.init()
            self.font = pygame.font.Font(None, STATUS_HEIGHT - 4)
        except Exception:  # noqa: BLE001  (no font support: the status goes in the title only)
            self.font = None

    def show(self, frame: np.ndarray, status: str) -> None:
        """Draws a frame and the status line, and puts the status in the title."""
        pygame = self.pygame
        if frame.shape[:2] != self.frame_shape:
            raise PlayError(f"env.render() changed its frame size from {self.frame_shape} to "
                            f"{frame.shape[:2]} (height, width)")
        height, width = self.frame_shape
        # (rows of RGB bytes are what pygame reads: no transposed copy of the frame)
        image = pygame.image.frombuffer(np.ascontiguousarray(frame), (width, height), "RGB")
        if image.get_size() != self.size:
            image = pygame.transform.scale(image, self.size)
        self.surface.blit(image, (0, 0))
        strip = pygame.Rect(0, self.size[1], self.size[0], STATUS_HEIGHT)
        self.surface.fill(_STATUS_BACKGROUND, strip)
        if self.font is not None:
            text = self.font.render(status, True, _STATUS_TEXT)
            self.surface.blit(text, (4, self.size[1] + (STATUS_HEIGHT - text.get_height()) // 2))
        pygame.display.set_caption(f"{self.caption}: {status}")
        pygame.display.flip()

    def save(self, path: str) -> None:
        """Writes what the window shows to an image file (PNG by its suffix)."""
        self.pygame.image.save(self.surface, path)

    def close(self) -> None:
        self.pygame.display.quit()
