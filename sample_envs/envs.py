"""Small, deterministic Gymnasium environments for tests, demos and benchmarks.

Every environment here is fully deterministic given ``reset(seed=...)`` and the
sequence of actions: all randomness is drawn from ``self.np_random`` during
``reset``. Episodes end on their own (by termination or truncation), so no
``TimeLimit`` wrapper is needed. Calling ``step`` before ``reset`` or after the
episode has ended raises ``RuntimeError``; an out-of-range action raises
``ValueError``.
"""

from __future__ import annotations

import string
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

__all__ = [
    "ChangingInfoEnv",
    "FixedLengthEnv",
    "ImageEnv",
    "NestedDictEnv",
    "TextEnv",
]

_NOT_RESET = "Cannot call step() before reset()."
_EPISODE_OVER = "The episode has ended; call reset() before calling step() again."


def _positive_int(name: str, value: Any) -> int:
    """Validates that ``value`` is an integer >= 1 and returns it as ``int``.

    Args:
        name: The argument name, used in the error message.
        value: The value to validate.

    Returns:
        ``value`` converted to a Python ``int``.

    Raises:
        ValueError: If ``value`` is not an integer (bools are rejected) or is < 1.
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return int(value)


# What a Discrete action space samples (numpy integers) and what step() takes: any integer.
DiscreteAction = int | np.integer[Any]


def _discrete_action(action: Any, n: int) -> int:
    """Converts a ``Discrete(n)`` action to ``int``, raising ValueError if invalid.

    Accepts Python/numpy integers and 0-d integer arrays.
    """
    if isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu":
        action = action.item()
    if not isinstance(action, (int, np.integer)) or not 0 <= action < n:
        raise ValueError(f"action must be an integer in [0, {n}), got {action!r}")
    return int(action)


class ImageEnv(gym.Env[np.ndarray, DiscreteAction]):
    """An image-observation environment whose ``step`` costs only a few microseconds.

    At ``reset`` a bank of 8 pairwise distinct ``(height, width, 3)`` uint8 frames is
    derived from ``self.np_random``: a seed-dependent colour gradient plus a square
    "sprite"; frame ``k`` moves the sprite and shifts all colours by ``32 * k``
    (mod 256). The frames are smooth, so they compress like real game frames. The reset
    observation is frame 0; after step ``t`` (``t`` = 1, 2, ...) with action ``a``
    the observation is frame ``(t + a) % 8``. No random numbers are generated per
    step, so the step cost is dominated by copying one frame.

    * Observation space: ``Box(0, 255, (height, width, 3), uint8)``.
    * Action space: ``Discrete(4)``.
    * Reward: ``float(a == t % 4)``.
    * Never terminates; truncates when ``t == episode_length``.
    * Info: ``{}`` on reset and on every step.

    With ``reuse_buffer=True`` ``reset`` and ``step`` return the *same* ndarray object
    every time, overwritten in place, to test that consumers (e.g. recorders) copy
    observations. This deliberately breaks Gymnasium's "no shared returned data"
    rule, so with ``gymnasium.make`` the passive env checker warns once (pass
    ``disable_env_checker=True`` to silence it) and ``check_env`` fails.

    Args:
        height: Frame height in pixels (>= 1).
        width: Frame width in pixels (>= 1).
        episode_length: Number of steps per episode (>= 1).
        reuse_buffer: Return one shared, in-place-updated buffer instead of copies.
        render_mode: ``None`` or ``"rgb_array"`` (``render`` returns a copy of the
            current frame).

    Raises:
        ValueError: If an argument is invalid.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}
    BANK_SIZE = 8

    def __init__(
        self,
        height: int = 64,
        width: int = 64,
        episode_length: int = 100,
        reuse_buffer: bool = False,
        render_mode: str | None = None,
    ) -> None:
        self.height = _positive_int("height", height)
        self.width = _positive_int("width", width)
        self.episode_length = _positive_int("episode_length", episode_length)
        if not isinstance(reuse_buffer, (bool, np.bool_)):
            raise ValueError(f"reuse_buffer must be a bool, got {reuse_buffer!r}")
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be None or one of {self.metadata['render_modes']}, "
                f"got {render_mode!r}"
            )
        self.reuse_buffer = bool(reuse_buffer)
        self.render_mode = render_mode

        shape = (self.height, self.width, 3)
        self.observation_space = spaces.Box(0, 255, shape, np.uint8)
        self.action_space = spaces.Discrete(4)

        self._bank: np.ndarray | None = None
        self._buffer: np.ndarray | None = np.zeros(shape, np.uint8) if self.reuse_buffer else None
        self._t = 0
        self._frame = 0

    def _make_bank(self) -> np.ndarray:
        """Derives the bank of ``BANK_SIZE`` distinct frames from ``self.np_random``."""
        rng = self.np_random
        h, w = self.height, self.width
        slope_y = rng.integers(1, 8, size=3)
        slope_x = rng.integers(1, 8, size=3)
        offset = rng.integers(0, 256, size=3)
        side = max(1, min(h, w) // 4)
        y0, x0 = int(rng.integers(0, h)), int(rng.integers(0, w))
        colour = rng.integers(0, 256, size=3, dtype=np.uint8)

        # Per-channel gradient (y * slope_y + x * slope_x + offset) mod 256, computed with
        # uint8 wrap-around so that building the bank stays cheap for large frames.
        # Frames are viewed as (h, w * 3) so the broadcast add has long inner loops.
        col = ((np.arange(h).reshape(h, 1) * slope_y + offset) % 256).astype(np.uint8)
        row = ((np.arange(w).reshape(w, 1) * slope_x) % 256).astype(np.uint8)
        bank = np.empty((self.BANK_SIZE, h, w, 3), np.uint8)
        np.add(np.tile(col, (1, w)), row.reshape(1, w * 3), out=bank[0].reshape(h, w * 3))
        for k in range(1, self.BANK_SIZE):
            np.add(bank[0], np.uint8(32 * k), out=bank[k])
        for k in range(self.BANK_SIZE):
            # Background and sprite colour both shift by 32 * k (mod 256), so all frames
            # are pairwise distinct, even when the sprite covers a whole 1x1 frame.
            y, x = (y0 + k * side) % h, (x0 + k * side) % w
            bank[k, y : y + side, x : x + side] = colour + np.uint8(32 * k)
        return bank

    def _observation(self) -> np.ndarray:
        assert self._bank is not None
        frame: np.ndarray = self._bank[self._frame]
        if self._buffer is not None:
            np.copyto(self._buffer, frame)
            return self._buffer
        return np.copy(frame, order="C")

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Resets the episode and regenerates the frame bank.

        Args:
            seed: Seed for ``self.np_random``.
            options: Unused.

        Returns:
            Frame 0 and an empty info dict.
        """
        super().reset(seed=seed)
        self._bank = self._make_bank()
        self._t = 0
        self._frame = 0
        return self._observation(), {}

    def step(self, action: DiscreteAction) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Advances one step; see the class docstring for the dynamics.

        Args:
            action: An integer in ``[0, 4)``.

        Returns:
            ``(observation, reward, terminated, truncated, info)``.
        """
        if self._bank is None:
            raise RuntimeError(_NOT_RESET)
        if self._t >= self.episode_length:
            raise RuntimeError(_EPISODE_OVER)
        a = _discrete_action(action, 4)
        self._t = t = self._t + 1
        self._frame = (t + a) % self.BANK_SIZE
        return self._observation(), float(a == t % 4), False, t >= self.episode_length, {}

    def render(self) -> np.ndarray | None:
        """Returns a copy of the current frame if ``render_mode == "rgb_array"``, else None."""
        if self.render_mode is None:
            return None
        if self._bank is None:
            raise RuntimeError("Cannot call render() before reset().")
        frame: np.ndarray = self._bank[self._frame]
        return np.copy(frame, order="C")


class NestedDictEnv(gym.Env[dict[str, Any], dict[str, Any]]):
    """An environment with a nested ``Dict`` observation of mixed dtypes.

    Observation space (keys are listed in the order Gymnasium's ``Dict`` sorts them
    and in which the observations are returned)::

        Dict({
            "count": Discrete(10),                        # np.int64
            "flags": MultiBinary(4),                      # int8 array
            "grid": Box(0, 255, (5, 5), uint8),
            "md": MultiDiscrete([3, 4, 5]),               # int64 array
            "nested": Dict({
                "a": Box(-inf, inf, (2,), float64),
                "pair": Tuple((Discrete(3),               # Python int
                               Box(-5, 5, (), int16))),   # 0-d int16 array
            }),
            "position": Box(-1, 1, (3,), float32),
        })

    Action space: ``Dict({"choice": Discrete(3), "move": Box(-1, 1, (2,), float32)})``.

    Dynamics at step ``t`` (1-based) with ``move`` (clipped to [-1, 1]) and ``choice``:

    * ``position = clip(position + 0.1 * [move[0], move[1], choice - 1], -1, 1)``
    * ``count = (count + choice) % 10`` (starts at 0)
    * ``flags[t % 4]`` is toggled
    * ``grid = roll(grid, choice, axis=1) + 1`` (uint8 wrap-around)
    * ``a = 0.9 * a + move``
    * ``pair = (t % 3, clip(round(5 * sum(position)), -5, 5))``
    * ``md = [t % 3, choice + t % 2, count % 5]``

    The initial position, flags, grid, ``a`` and ``md`` are drawn from
    ``self.np_random``. The reward is ``np.float32(1 - mean(|position|))``.
    The episode terminates when ``count == 9`` (e.g. at step 9 if ``choice`` is
    always 1; never if ``choice`` is always 0) and truncates when
    ``t == episode_length``; both flags can be True on the same step. Infos are ``{}``.

    Args:
        episode_length: Maximum number of steps per episode (>= 1).

    Raises:
        ValueError: If an argument is invalid.
    """

    metadata = {"render_modes": [], "render_fps": 30}

    def __init__(self, episode_length: int = 20) -> None:
        self.episode_length = _positive_int("episode_length", episode_length)
        self.observation_space = spaces.Dict(
            {
                "position": spaces.Box(-1.0, 1.0, (3,), np.float32),
                "count": spaces.Discrete(10),
                "flags": spaces.MultiBinary(4),
                "grid": spaces.Box(0, 255, (5, 5), np.uint8),
                "nested": spaces.Dict(
                    {
                        "a": spaces.Box(-np.inf, np.inf, (2,), np.float64),
                        "pair": spaces.Tuple(
                            (spaces.Discrete(3), spaces.Box(-5, 5, (), np.int16))
                        ),
                    }
                ),
                "md": spaces.MultiDiscrete([3, 4, 5]),
            }
        )
        self.action_space = spaces.Dict(
            {
                "move": spaces.Box(-1.0, 1.0, (2,), np.float32),
                "choice": spaces.Discrete(3),
            }
        )
        self._t: int | None = None
        self._position = np.zeros(3, np.float32)
        self._count = 0
        self._flags = np.zeros(4, np.int8)
        self._grid = np.zeros((5, 5), np.uint8)
        self._a = np.zeros(2, np.float64)
        self._pair = (0, 0)
        self._md = np.zeros(3, np.int64)

    def _observation(self) -> dict[str, Any]:
        return {
            "count": np.int64(self._count),
            "flags": self._flags.copy(),
            "grid": self._grid.copy(),
            "md": self._md.copy(),
            "nested": {
                "a": self._a.copy(),
                "pair": (int(self._pair[0]), np.array(self._pair[1], dtype=np.int16)),
            },
            "position": self._position.copy(),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Resets the episode.

        Args:
            seed: Seed for ``self.np_random``.
            options: Unused.

        Returns:
            The initial observation and an empty info dict.
        """
        super().reset(seed=seed)
        rng = self.np_random
        self._t = 0
        self._position = rng.uniform(-0.5, 0.5, size=3).astype(np.float32)
        self._count = 0
        self._flags = rng.integers(0, 2, size=4, dtype=np.int8)
        self._grid = rng.integers(0, 256, size=(5, 5), dtype=np.uint8)
        self._a = rng.normal(size=2)
        self._pair = (0, 0)
        self._md = rng.integers(0, [3, 4, 5]).astype(np.int64)
        return self._observation(), {}

    def step(
        self, action: dict[str, Any]
    ) -> tuple[dict[str, Any], SupportsFloat, bool, bool, dict[str, Any]]:
        """Advances one step; see the class docstring for the dynamics.

        Args:
            action: ``{"move": float array of shape (2,), "choice": int in [0, 3)}``.

        Returns:
            ``(observation, reward, terminated, truncated, info)``.
        """
        if self._t is None:
            raise RuntimeError(_NOT_RESET)
        if self._t >= self.episode_length or self._count == 9:
            raise RuntimeError(_EPISODE_OVER)
        move = np.asarray(action["move"], dtype=np.float32)
        if move.shape != (2,):
            raise ValueError(f"action['move'] must have shape (2,), got {move.shape}")
        move = np.clip(move, -1.0, 1.0)
        choice = _discrete_action(action["choice"], 3)

        self._t = t = self._t + 1
        delta = np.array([move[0], move[1], choice - 1], dtype=np.float32)
        self._position = np.clip(self._position + np.float32(0.1) * delta, -1.0, 1.0).astype(
            np.float32
        )
        self._count = (self._count + choice) % 10
        self._flags = self._flags.copy()
        self._flags[t % 4] ^= 1
        self._grid = np.roll(self._grid, choice, axis=1) + np.uint8(1)
        self._a = 0.9 * self._a + move.astype(np.float64)
        self._pair = (t % 3, int(np.clip(np.rint(5.0 * float(self._position.sum())), -5, 5)))
        self._md = np.array([t % 3, choice + t % 2, self._count % 5], dtype=np.int64)

        reward = np.float32(1.0 - float(np.abs(self._position).mean()))
        terminated = self._count == 9
        truncated = t >= self.episode_length
        return self._observation(), reward, terminated, truncated, {}


class TextEnv(gym.Env[str, DiscreteAction]):
    """An environment with ``Text`` observations of varying length (including 0).

    At ``reset`` a 64-character pool is drawn from ``CHARSET`` (ASCII letters,
    digits and space) with ``self.np_random``. At step ``t`` (0 for the reset
    observation) with action ``a`` (``a`` = 0 at reset) the observation is
    ``pool[start : start + length]`` with ``length = LENGTHS[(t + a) % 11]`` and
    ``start = (5 * t + a) % 32``, where ``LENGTHS = (0, 3, 12, 32, 1, 0, 7, 26, 32, 5, 19)``.
    The reset observation is therefore always ``""``.

    * Observation space: ``Text(max_length=32, min_length=0, charset=CHARSET)``.
    * Action space: ``Discrete(3)``.
    * Reward: ``len(observation) / 32`` (Python float).
    * Never terminates; truncates when ``t == episode_length``.
    * Info: ``{"message": "reset"}`` on reset and
      ``{"message": f"step {t} action {a}"}`` on steps.

    Args:
        episode_length: Number of steps per episode (>= 1).

    Raises:
        ValueError: If an argument is invalid.
    """

    metadata = {"render_modes": [], "render_fps": 30}
    CHARSET = string.ascii_letters + string.digits + " "
    MAX_LENGTH = 32
    LENGTHS = (0, 3, 12, 32, 1, 0, 7, 26, 32, 5, 19)

    def __init__(self, episode_length: int = 10) -> None:
        self.episode_length = _positive_int("episode_length", episode_length)
        self.observation_space = spaces.Text(
            max_length=self.MAX_LENGTH, min_length=0, charset=self.CHARSET
        )
        self.action_space = spaces.Discrete(3)
        self._t: int | None = None
        self._pool = ""

    def _observation(self, t: int, a: int) -> str:
        length = self.LENGTHS[(t + a) % len(self.LENGTHS)]
        start = (5 * t + a) % 32
        return self._pool[start : start + length]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Resets the episode and redraws the character pool.

        Args:
            seed: Seed for ``self.np_random``.
            options: Unused.

        Returns:
            The empty string and ``{"message": "reset"}``.
        """
        super().reset(seed=seed)
        indices = self.np_random.integers(0, len(self.CHARSET), size=64)
        self._pool = "".join(self.CHARSET[i] for i in indices)
        self._t = 0
        return self._observation(0, 0), {"message": "reset"}

    def step(self, action: DiscreteAction) -> tuple[str, SupportsFloat, bool, bool, dict[str, Any]]:
        """Advances one step; see the class docstring for the dynamics.

        Args:
            action: An integer in ``[0, 3)``.

        Returns:
            ``(observation, reward, terminated, truncated, info)``.
        """
        if self._t is None:
            raise RuntimeError(_NOT_RESET)
        if self._t >= self.episode_length:
            raise RuntimeError(_EPISODE_OVER)
        a = _discrete_action(action, 3)
        self._t = t = self._t + 1
        obs = self._observation(t, a)
        info = {"message": f"step {t} action {a}"}
        return obs, len(obs) / self.MAX_LENGTH, False, t >= self.episode_length, info


class ChangingInfoEnv(gym.Env[np.ndarray, DiscreteAction]):
    """An environment whose info dict changes keys (and value types) within an episode.

    Reset info is ``{"start": np.int64(s)}`` with ``s`` drawn from ``self.np_random``.
    The info of step ``t`` (1-based) follows a 5-step cycle on ``(t - 1) % 5``:

    0. ``{}``
    1. ``{"x": float}``
    2. ``{"x": float, "arr": np.arange(3, dtype=np.int32) * t}``
    3. ``{"name": f"step-{t}", "nested": {"k": [1, 2, t]}}``
    4. ``{"flag": True, "maybe": None}``

    where ``x = phase * t`` and ``phase`` is drawn from ``self.np_random`` at reset.
    On the last step (``t == episode_length``) the key ``"final": np.float32(phase * t)``
    is added to that step's info.

    * Observation space: ``Box(-1, 1, (2,), float32)``; the observation is
      ``[t / episode_length, phase if a == 0 else -phase]`` (``a`` = 0 at reset).
    * Action space: ``Discrete(2)``.
    * Reward: ``float(a)``.
    * Never terminates; truncates when ``t == episode_length``.

    Args:
        episode_length: Number of steps per episode (>= 1).

    Raises:
        ValueError: If an argument is invalid.
    """

    metadata = {"render_modes": [], "render_fps": 30}

    def __init__(self, episode_length: int = 12) -> None:
        self.episode_length = _positive_int("episode_length", episode_length)
        self.observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = spaces.Discrete(2)
        self._t: int | None = None
        self._phase = 0.0

    def _info(self, t: int) -> dict[str, Any]:
        x = self._phase * t
        kind = (t - 1) % 5
        info: dict[str, Any]
        if kind == 0:
            info = {}
        elif kind == 1:
            info = {"x": x}
        elif kind == 2:
            info = {"x": x, "arr": np.arange(3, dtype=np.int32) * np.int32(t)}
        elif kind == 3:
            info = {"name": f"step-{t}", "nested": {"k": [1, 2, t]}}
        else:
            info = {"flag": True, "maybe": None}
        if t >= self.episode_length:
            info["final"] = np.float32(x)
        return info

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Resets the episode.

        Args:
            seed: Seed for ``self.np_random``.
            options: Unused.

        Returns:
            The initial observation and ``{"start": np.int64}``.
        """
        super().reset(seed=seed)
        start = np.int64(self.np_random.integers(0, 2**31))
        self._phase = float(self.np_random.uniform(-1.0, 1.0))
        self._t = 0
        return np.array([0.0, self._phase], dtype=np.float32), {"start": start}

    def step(self, action: DiscreteAction) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Advances one step; see the class docstring for the dynamics.

        Args:
            action: 0 or 1.

        Returns:
            ``(observation, reward, terminated, truncated, info)``.
        """
        if self._t is None:
            raise RuntimeError(_NOT_RESET)
        if self._t >= self.episode_length:
            raise RuntimeError(_EPISODE_OVER)
        a = _discrete_action(action, 2)
        self._t = t = self._t + 1
        obs = np.array(
            [t / self.episode_length, self._phase if a == 0 else -self._phase], dtype=np.float32
        )
        return obs, float(a), False, t >= self.episode_length, self._info(t)


class FixedLengthEnv(gym.Env[np.ndarray, DiscreteAction]):
    """An environment whose episodes last exactly ``episode_length`` steps.

    At ``reset`` an integer array ``base`` of shape ``obs_shape`` with values in
    ``[0, 128)`` is drawn from ``self.np_random``; the observation at step ``t``
    (0 for the reset observation) is ``((base + t) % 128).astype(obs_dtype)``,
    independent of the actions. The values are small integers, so they are exact in
    every supported dtype (even ``int8`` and ``float16``).

    * Observation space: ``Box(0, 127, obs_shape, obs_dtype)``.
    * Action space: ``Discrete(2)``.
    * Reward: ``1.0`` per step.
    * At ``t == episode_length`` the episode terminates (``terminate=True``) or is
      truncated (``terminate=False``); never earlier.
    * Info: ``{}``.

    Args:
        episode_length: Number of steps per episode (>= 1).
        terminate: End with ``terminated=True`` (else ``truncated=True``).
        obs_shape: Observation shape: a tuple of positive ints (``()`` is allowed
            and gives 0-d array observations) or a single positive int.
        obs_dtype: A numeric (integer or floating-point) numpy dtype.

    Raises:
        ValueError: If an argument is invalid.
    """

    metadata = {"render_modes": [], "render_fps": 30}

    def __init__(
        self,
        episode_length: int = 10,
        terminate: bool = True,
        obs_shape: int | tuple[int, ...] = (4,),
        obs_dtype: npt.DTypeLike = "float32",
    ) -> None:
        self.episode_length = _positive_int("episode_length", episode_length)
        if not isinstance(terminate, (bool, np.bool_)):
            raise ValueError(f"terminate must be a bool, got {terminate!r}")
        self.terminate = bool(terminate)

        dims = (obs_shape,) if isinstance(obs_shape, (int, np.integer)) else obs_shape
        if not isinstance(dims, (tuple, list)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) and d >= 1 for d in dims
        ):
            raise ValueError(
                f"obs_shape must be a positive int or a tuple of positive ints, got {obs_shape!r}"
            )
        shape = tuple(int(d) for d in dims)
        try:
            dtype = np.dtype(obs_dtype)
        except TypeError as e:
            raise ValueError(f"obs_dtype is not a valid numpy dtype: {obs_dtype!r}") from e
        if dtype.kind not in "iuf":
            raise ValueError(
                f"obs_dtype must be an integer or floating-point dtype, got {dtype}"
            )
        self.obs_shape = shape
        self.obs_dtype = dtype

        self.observation_space = spaces.Box(0, 127, shape, dtype)
        self.action_space = spaces.Discrete(2)
        self._t: int | None = None
        self._base = np.zeros(shape, np.int64)

    def _observation(self) -> np.ndarray:
        assert self._t is not None
        return np.array((self._base + self._t) % 128, dtype=self.obs_dtype)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Resets the episode.

        Args:
            seed: Seed for ``self.np_random``.
            options: Unused.

        Returns:
            The initial observation and an empty info dict.
        """
        super().reset(seed=seed)
        self._base = np.asarray(self.np_random.integers(0, 128, size=self.obs_shape))
        self._t = 0
        return self._observation(), {}

    def step(self, action: DiscreteAction) -> tuple[np.ndarray, SupportsFloat, bool, bool, dict[str, Any]]:
        """Advances one step; see the class docstring for the dynamics.

        Args:
            action: 0 or 1 (ignored apart from validation).

        Returns:
            ``(observation, reward, terminated, truncated, info)``.
        """
        if self._t is None:
            raise RuntimeError(_NOT_RESET)
        if self._t >= self.episode_length:
            raise RuntimeError(_EPISODE_OVER)
        _discrete_action(action, 2)
        self._t += 1
        done = self._t >= self.episode_length
        terminated = done and self.terminate
        truncated = done and not self.terminate
        return self._observation(), 1.0, terminated, truncated, {}
