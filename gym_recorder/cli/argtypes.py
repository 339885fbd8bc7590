"""argparse types of ``gym-recorder``'s options: each checks a value's text and says what is
wrong with it (argparse then exits with a usage error, status 2, before anything runs)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

__all__ = ["int_at_least", "json_object", "key_value", "non_negative_int", "pixels",
           "positive_int", "wrapper"]


def json_object(text: str) -> dict[str, Any]:
    """argparse type for --env-kwargs: a JSON object."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON ({e})") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"render_mode\": "
                                         "\"rgb_array\"}'")
    return value


def int_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse type: an integer no smaller than ``minimum``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from e
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


positive_int = int_at_least(1)
non_negative_int = int_at_least(0)


def pixels(text: str) -> tuple[int, int]:
    """argparse type for --size: WIDTHxHEIGHT, both positive."""
    try:
        w, h = (int(v) for v in text.lower().split("x"))
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"{text!r} is not WIDTHxHEIGHT, e.g. 1000x600") from e
    if w < 1 or h < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: width and height must be positive")
    return w, h


def key_value(text: str) -> tuple[str, str]:
    """argparse type for --meta: KEY=VALUE (the value a string, possibly empty)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE, e.g. author=me")
    return key.strip(), value


def wrapper(text: str) -> tuple[str, dict[str, Any]]:
    """argparse type for --wrapper: NAME or NAME:KEY=VALUE,..."""
    from ..replay.drive import parse_wrapper

    try:
        return parse_wrapper(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e
