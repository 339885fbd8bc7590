"""An env spec's values as JSON: kwargs kept as they are, numpy values and spaces tagged.

:func:`encode_arg` turns one kwarg into JSON (a small numpy array, a dtype, a space or a tuple
as a tagged object) or refuses it; :func:`decode_arg` gives it back; :func:`split_kwargs` keeps
what JSON can hold and names, with a short ``repr``, what it cannot (``missing_kwargs``).
:data:`MODULE_NAME_RE` is what a recorded module name may be.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_ARRAY_ELEMENTS", "MODULE_NAME_RE", "REPR_CHARS", "decode_arg", "encode_arg",
           "split_kwargs"]

# How much of a left-out value's repr is kept (to name it, not to rebuild it).
REPR_CHARS = 200
MODULE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def _json_ok(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
        return True
    except (TypeError, ValueError):
        return False


# numpy values and spaces in kwargs are kept as tagged objects (small arrays only).
MAX_ARRAY_ELEMENTS = 4096


def encode_arg(value: Any) -> Any:
    """A kwarg as JSON: itself, or a tagged numpy value, dtype, space or tuple (lists, tuples and
    dicts with str keys are encoded item by item); raises TypeError or ValueError otherwise."""
    import gymnasium as gym
    import numpy as np

    from .spaces import describe_space

    if isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "biuf" and \
            np.size(value) <= MAX_ARRAY_ELEMENTS:
        out = {"__numpy__": value.dtype.str, "shape": list(np.shape(value)),
               "value": np.asarray(value).tolist()}
        json.dumps(out, allow_nan=False)
        return out
    if isinstance(value, gym.Space):
        desc = describe_space(value)
        if desc.get("type") == "unknown":
            raise TypeError("unknown space")
        return {"__space__": desc}
    if isinstance(value, np.dtype) or (isinstance(value, type) and
                                       issubclass(value, np.generic)):
        dtype = np.dtype(value)
        if dtype.kind not in "biufc" or dtype.hasobject:
            raise TypeError("not a numeric dtype")
        return {"__dtype__": dtype.str, "type": isinstance(value, type)}
    if isinstance(value, tuple):  # (JSON would make it a list: ReshapeObservation refuses one)
        return {"__tuple__": [encode_arg(v) for v in value]}
    if isinstance(value, list):
        return [encode_arg(v) for v in value]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError("a dict with keys that are not str")
        encoded = {k: encode_arg(v) for k, v in value.items()}
        if any(k in encoded for k in _TAGS):
            raise TypeError("a dict with a key that tags an encoded value")
        return encoded
    json.dumps(value, allow_nan=False)
    return value


# The keys that mark a tagged (encoded) value in recorded kwargs.
_TAGS = ("__numpy__", "__space__", "__dtype__", "__tuple__")


def decode_arg(value: Any) -> Any:
    """A recorded kwarg back as it was given (the inverse of :func:`encode_arg`), its tags and
    dtypes checked as a recording's (untrusted) contents.

    Raises:
        FormatError: for a dtype or space a recording may not hold.
        ValueError: for a malformed tag.
    """
    import numpy as np

    from .dtypes import parse_dtype
    from .spaces import build_space

    if isinstance(value, list):
        return [decode_arg(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__numpy__" in value:
        dtype = parse_dtype(value["__numpy__"], "wrapper argument")
        arr = np.array(value.get("value"), dtype=dtype)
        return arr.reshape(value.get("shape", arr.shape)) if arr.ndim else dtype.type(arr)
    if "__space__" in value:
        return build_space(value["__space__"], "wrapper argument")
    if "__dtype__" in value:
        dtype = parse_dtype(value["__dtype__"], "wrapper argument")
        return dtype.type if value.get("type") is True else dtype
    if "__tuple__" in value:
        items = value["__tuple__"]
        if not isinstance(items, list):
            raise ValueError("__tuple__ must hold a list")
        return tuple(decode_arg(v) for v in items)
    return {k: decode_arg(v) for k, v in value.items()}


def split_kwargs(kwargs: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the kwargs JSON can hold, {name: repr} of those it cannot)."""
    kept, missing = {}, {}
    for k, v in (kwargs or {}).items():
        try:
            if not isinstance(k, str):
                raise TypeError
            kept[k] = encode_arg(v)
        except (TypeError, ValueError):
            missing[str(k)] = repr(v)[:REPR_CHARS]
    return kept, missing
