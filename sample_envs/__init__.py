"""Small, deterministic Gymnasium environments for tests, demos and benchmarks.

Importing this package registers the following ids with Gymnasium (no
``max_episode_steps``: every episode ends by itself; the passive env checker
stays enabled):

* ``sample_envs/Image-v0`` -> :class:`ImageEnv` -- cheap uint8 image observations.
* ``sample_envs/NestedDict-v0`` -> :class:`NestedDictEnv` -- nested ``Dict``/``Tuple``
  observations of mixed dtypes, ``Dict`` actions, ``np.float32`` rewards.
* ``sample_envs/Text-v0`` -> :class:`TextEnv` -- ``Text`` observations of varying length.
* ``sample_envs/ChangingInfo-v0`` -> :class:`ChangingInfoEnv` -- info keys change
  within an episode.
* ``sample_envs/FixedLength-v0`` -> :class:`FixedLengthEnv` -- exactly N steps, ends
  by termination or truncation, configurable observation shape and dtype.

Example:
    >>> import gymnasium as gym
    >>> import sample_envs
    >>> env = gym.make("sample_envs/Image-v0", height=84, width=84)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape
    (84, 84, 3)
"""

from __future__ import annotations

import gymnasium

from sample_envs.envs import ChangingInfoEnv, FixedLengthEnv, ImageEnv, NestedDictEnv, TextEnv

__all__ = [
    "ENV_IDS",
    "ChangingInfoEnv",
    "FixedLengthEnv",
    "ImageEnv",
    "NestedDictEnv",
    "TextEnv",
    "register_envs",
]

_ENTRY_POINTS: dict[str, str] = {
    "sample_envs/Image-v0": "sample_envs.envs:ImageEnv",
    "sample_envs/NestedDict-v0": "sample_envs.envs:NestedDictEnv",
    "sample_envs/Text-v0": "sample_envs.envs:TextEnv",
    "sample_envs/ChangingInfo-v0": "sample_envs.envs:ChangingInfoEnv",
    "sample_envs/FixedLength-v0": "sample_envs.envs:FixedLengthEnv",
}

#: All environment ids registered by this package.
ENV_IDS: tuple[str, ...] = tuple(_ENTRY_POINTS)


def register_envs() -> None:
    """Registers all sample environments with Gymnasium (idempotent).

    Called on import; ids that are already registered are left untouched.
    """
    for env_id, entry_point in _ENTRY_POINTS.items():
        if env_id not in gymnasium.registry:
            gymnasium.register(id=env_id, entry_point=entry_point)


register_envs()
