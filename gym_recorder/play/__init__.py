"""Human play: a person plays an env with the keyboard; the episodes they keep are recorded.

``keys`` (key maps: names, combinations, actions checked against the action space; ``--keys``
text), ``window`` (the pygame window: frames and a status line), ``episodes`` (one writer for
the session; kept episodes committed as they end, discarded ones deleted through the edit
record), ``loop`` (:func:`play` itself). ``gym-recorder play`` is :mod:`gym_recorder.cli.play`. Needs pygame
(the ``play`` extra), imported when play starts.
"""

from .loop import DEFAULT_FPS, PlayStatus, PlaySummary, play

__all__ = ["play", "PlayStatus", "PlaySummary", "DEFAULT_FPS"]
