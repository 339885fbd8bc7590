"""Key maps of ``play``: which keys held together give which action, checked before the window opens.

A key map is a mapping from key combinations to actions. A combination is one key or a tuple of
keys held together; a key is a pygame key name (``"a"``, ``"space"``, ``"left"``, ``"left
shift"``; a single character such as ``" "`` is that key) or a pygame key code (an int). The
combinations become sorted tuples of key codes once (:func:`build_key_map`), every action is
converted to the action space's type and checked against the space, and so is the no-op action
(the action taken while no mapped combination is held). Nothing here opens a window.

:func:`parse_keys` reads the command line's ``--keys`` text: ``KEYS=ACTION`` items separated by
commas, ``KEYS`` key names joined by ``+``, ``ACTION`` a JSON number or list::

    a=0,d=1                      Discrete: a pushes left, d right
    left=[-1],right=[1]          Box of shape (1,)
    up=[1,0],left+up=[1,-1]      Box of shape (2,); left and up held together
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from ..errors import PlayError

__all__ = ["KeyMap", "CONTROL_KEYS", "build_key_map", "parse_keys", "key_code", "as_action"]

# The keys that steer the session, never the env: a key map may not use them.
CONTROL_KEYS: dict[str, str] = {"pause": "p", "restart": "r", "discard": "backspace",
                                "quit": "escape"}

# Gymnasium's MountainCar key map still uses SDL 1 key codes for the arrows, which pygame 2 names
# nothing; they are read as the arrows they meant.
_SDL1_ARROWS = {273: "up", 274: "down", 275: "right", 276: "left"}


def _pygame() -> Any:
    import pygame

    if not pygame.display.get_init():
        pygame.display.init()  # (key names need it; the window is opened later, by play)
    return pygame


def key_code(key: object) -> int:
    """The pygame key code of a key name (``"a"``, ``"space"``, ``"left"``) or code.

    Raises:
        PlayError: if the name is not a key pygame knows, or the key is neither str nor int.
    """
    pygame = _pygame()
    if isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
        code = int(key)
        if code in _SDL1_ARROWS and not pygame.key.name(code):
            return int(pygame.key.key_code(_SDL1_ARROWS[code]))
        return code
    if isinstance(key, str) and key:
        try:
            return int(pygame.key.key_code(key))
        except ValueError:
            raise PlayError(f"unknown key name {key!r} (pygame's names: 'a', 'space', 'left', "
                            "'left shift', 'return', ...)") from None
    raise PlayError(f"a key must be a key name or a pygame key code, got {key!r}")


def key_name(code: int) -> str:
    """pygame's name of a key code (the code itself, as text, if pygame has none)."""
    return str(_pygame().key.name(code)) or str(code)


def as_action(value: Any, space: gym.Space[Any], what: str) -> Any:
    """``value`` as an action of ``space``: an int for Discrete, an array of the space's dtype
    and shape for Box, MultiDiscrete and MultiBinary (a bare number fills a one-item shape).

    Raises:
        PlayError: if the value is not of the space's kind or not inside the space.
    """
    action: Any = value
    if isinstance(space, gym.spaces.Discrete):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise PlayError(f"{what}: {value!r} is not an integer action of {space}")
        action = int(value)
    elif isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        try:
            array = np.asarray(value)
            if array.dtype.kind not in "biuf" or array.size != int(np.prod(space.shape)):
                raise ValueError("size")
            action = array.astype(space.dtype).reshape(space.shape)
            if space.dtype.kind != "f" and not np.array_equal(action, array.reshape(space.shape)):
                raise ValueError("inexact")  # (1.5 for an integer space; floats round)
        except (TypeError, ValueError):
            raise PlayError(f"{what}: {value!r} is not an action of {space} (a list of "
                            f"{int(np.prod(space.shape))} numbers)") from None
    try:
        inside = bool(space.contains(action))
    except Exception:  # noqa: BLE001  (a value the space cannot even compare)
        inside = False
    if not inside:
        raise PlayError(f"{what}: {value!r} is not in the action space {space}")
    return action


def _default_noop(space: gym.Space[Any]) -> Any:
    if isinstance(space, gym.spaces.Discrete):
        return int(space.start)
    if isinstance(space, (gym.spaces.Box, gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
        return np.zeros(space.shape, dtype=space.dtype)
    raise PlayError(f"no default no-op action for {space}: give noop (--noop)")


@dataclass
class KeyMap:
    """A checked key map: sorted key-code tuples to actions, the no-op, and the keys to watch.

    Attributes:
        actions: key-code combination (sorted tuple) -> action.
        noop: the action while no mapped combination is held.
        relevant: every key code some combination uses.
    """

    actions: dict[tuple[int, ...], Any]
    noop: Any
    relevant: frozenset[int] = field(default_factory=frozenset)

    def action(self, pressed: set[int] | frozenset[int]) -> Any:
        """The action for the keys held now (only mapped keys count; else the no-op)."""
        combo = tuple(sorted(pressed & self.relevant))
        return self.actions.get(combo, self.noop)

    def describe(self) -> dict[str, Any]:
        """The key map as JSON-able data: key names and actions, and the no-op (the recording's
        metadata keeps them)."""
        def plain(a: Any) -> Any:
            return a.tolist() if isinstance(a, np.ndarray) else a
        return {"keys": [[[key_name(c) for c in combo], plain(a)]
                         for combo, a in self.actions.items()],
                "noop": plain(self.noop)}


def build_key_map(keys_to_action: Mapping[Any, Any] | None, env: gym.Env[Any, Any],
                  noop: Any = None) -> KeyMap:
    """Checks a key map against the env's action space; ``None`` takes the env's own
    (``env.unwrapped.get_keys_to_action()``: ALE games, MountainCar).

    An empty combination ``()`` in the map gives the no-op when ``noop`` is None; otherwise the
    no-op is 0 for Discrete and zeros for Box, MultiDiscrete and MultiBinary spaces.

    Raises:
        PlayError: if there is no map, a key is unknown, a combination is given twice or uses a
            control key, or an action (or the no-op) is not in the action space.
    """
    if keys_to_action is None:
        getter = getattr(env.unwrapped, "get_keys_to_action", None)
        if getter is None:
            raise PlayError(f"{env.unwrapped.__class__.__name__} has no key map of its own "
                            "(get_keys_to_action): give one (keys_to_action, or --keys "
                            "'a=0,d=1')")
        keys_to_action = getter()
    if not isinstance(keys_to_action, Mapping) or not keys_to_action:
        raise PlayError(f"the key map must be a non-empty mapping, got {keys_to_action!r}")
    space = env.action_space
    controls = {key_code(name): what for what, name in CONTROL_KEYS.items()}
    actions: dict[tuple[int, ...], Any] = {}
    empty_action = None
    for keys, value in keys_to_action.items():
        combo_keys = keys if isinstance(keys, tuple) else (keys,)
        what = f"key map entry {keys!r}"
        action = as_action(value, space, what)
        if not combo_keys:
            empty_action = action
            continue
        combo = tuple(sorted({key_code(k) for k in combo_keys}))
        for code in combo:
            if code in controls:
                raise PlayError(f"{what}: {key_name(code)!r} is the {controls[code]} key of "
                                "play; map another key")
        if combo in actions:
            raise PlayError(f"{what}: the keys {[key_name(c) for c in combo]} are mapped twice")
        actions[combo] = action
    if not actions:
        raise PlayError("the key map maps no keys")
    if noop is not None:
        noop_action = as_action(noop, space, "the no-op action")
    elif empty_action is not None:
        noop_action = empty_action
    else:
        noop_action = as_action(_default_noop(space), space, "the default no-op action")
    relevant = frozenset(code for combo in actions for code in combo)
    return KeyMap(actions, noop_action, relevant)


def _split_items(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def parse_keys(text: str) -> dict[tuple[str, ...], Any]:
    """Reads ``--keys`` text (``a=0,d=1``; ``left=[-1],right=[1]``; ``a+space=5``).

    Raises:
        PlayError: if an item is not ``KEYS=ACTION`` with ACTION a JSON number or list.
    """
    result: dict[tuple[str, ...], Any] = {}
    for item in _split_items(text):
        keys, sep, value = item.partition("=")
        names = tuple(name.strip() for name in keys.split("+"))
        if not sep or not all(names):
            raise PlayError(f"--keys item {item!r} is not KEYS=ACTION (e.g. a=0, "
                            "left+up=[1,-1])")
        try:
            action = json.loads(value)
        except json.JSONDecodeError:
            raise PlayError(f"--keys item {item!r}: {value.strip()!r} is not a JSON number "
                            "or list") from None
        if isinstance(action, bool) or not isinstance(action, (int, float, list)):
            raise PlayError(f"--keys item {item!r}: the action must be a number or a list")
        if names in result:
            raise PlayError(f"--keys: {'+'.join(names)} is given twice")
        result[names] = action
    if not result:
        raise PlayError("--keys maps no keys (e.g. --keys 'a=0,d=1')")
    return result
