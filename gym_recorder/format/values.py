"""VALUEs: how infos, reset options and leaves that do not stack are stored (the format's "Values").

:func:`encode_value` turns a Python/numpy value into the JSON-ready VALUE the specification in
:mod:`gym_recorder.format` describes, handing each numpy array to an :data:`ArraySink` (the
writer's .bin); :func:`decode_value` turns a VALUE read from a batch back into the value, asking an
:data:`ArraySource` for each ARRAY reference; :func:`snapshot` and :func:`record_info` copy and
check a value (an info, reset options, a leaf that does not stack) at the step it is recorded, so
that what the env mutates later is not what gets written. All bound nesting by
:data:`~gym_recorder.format.MAX_NESTING`. No I/O here.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import FormatError, UnsupportedValueError
from .constants import MAX_NESTING
from .dtypes import parse_dtype

__all__ = ["ArraySink", "ArraySource", "encode_value", "decode_value", "snapshot", "record_info",
           "check_metadata", "manifest_metadata", "MAX_METADATA_BYTES", "array_refs"]

# sink(array) -> the ARRAY reference object stored in its place.
ArraySink = Callable[[np.ndarray], dict[str, Any]]
# source(reference, where) -> the array an ARRAY reference object names.
ArraySource = Callable[[dict[str, Any], str], np.ndarray]
# The strings a non-finite float is written as (see "Values" in the specification).
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
# A recording's metadata (who or what produced it: a policy name, an author, notes) is repeated
# in the header of batch files; 64 KiB of JSON holds long notes and stays small beside any batch.
MAX_METADATA_BYTES = 1 << 16


def _float_json(x: float) -> Any:
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def encode_value(value: Any, sink: ArraySink, where: str = "value", depth: int = 0) -> Any:
    """Encodes a Python/numpy value as a JSON-ready VALUE (see "Values" in the specification).

    Args:
        value: the value to encode.
        sink: called with each numpy array found; returns the ARRAY reference to store.
        where: names the value (e.g. ``info['x']``) in error messages.
        depth: current nesting depth.

    Raises:
        UnsupportedValueError: for values that cannot be stored losslessly.
    """
    if depth > MAX_NESTING:
        raise UnsupportedValueError(f"{where}: nested deeper than {MAX_NESTING} levels")
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        if math.isfinite(value):
            return value
        return {"__type": "float", "value": _float_json(value)}
    if t is np.ndarray:
        if value.dtype.hasobject or value.dtype.kind not in "biufcUS":
            raise UnsupportedValueError(
                f"{where}: numpy arrays of dtype {value.dtype} cannot be stored"
            )
        return sink(value)
    if isinstance(value, np.generic):
        kind = value.dtype.kind
        if kind in "biu":
            return {"__type": "scalar", "dtype": value.dtype.str, "value": value.item()}
        if kind == "f" and value.dtype.itemsize <= 8:
            return {"__type": "scalar", "dtype": value.dtype.str,
                    "value": _float_json(float(value))}
        if kind == "c" and value.dtype.itemsize <= 16:
            return {"__type": "scalar", "dtype": value.dtype.str,
                    "value": [_float_json(value.real.item()), _float_json(value.imag.item())]}
        if kind in "US" or kind == "f" or kind == "c":
            if kind in "US":
                # (the array's dtype: an empty np.str_ is <U0, which no array has; its array is <U1)
                arr = np.asarray(value)
            else:
                # Extended precision: the scalar's own bytes. np.asarray copies only the value of
                # an x87 long double, leaving its padding (6 of 16 bytes) as uninitialised memory:
                # a complex one's on every numpy, a real one's too on numpy 2.5.
                arr = np.frombuffer(value.tobytes(), value.dtype).reshape(()).copy()
            return {"__type": "scalar", "dtype": arr.dtype.str, "value": sink(arr)}
        raise UnsupportedValueError(f"{where}: numpy scalars of dtype {value.dtype} cannot be stored")
    if t is dict or isinstance(value, dict):
        if all(type(k) is str for k in value) and "__type" not in value:
            return {k: encode_value(v, sink, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}
        return {"__type": "dict", "items": [
            [encode_value(k, sink, f"{where} key", depth + 1),
             encode_value(v, sink, f"{where}[{k!r}]", depth + 1)] for k, v in value.items()]}
    if t is list:
        return [encode_value(v, sink, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if t is tuple:
        return {"__type": "tuple",
                "items": [encode_value(v, sink, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]}
    if t is bytes:
        return {"__type": "bytes", "base64": base64.b64encode(value).decode("ascii")}
    if t.__name__ == "GraphInstance" and hasattr(value, "edge_links"):
        return {"__type": "graph",
                "nodes": encode_value(value.nodes, sink, f"{where}.nodes", depth + 1),
                "edges": encode_value(value.edges, sink, f"{where}.edges", depth + 1),
                "edge_links": encode_value(value.edge_links, sink, f"{where}.edge_links", depth + 1)}
    if isinstance(value, (bool, int, float, str, list, tuple)):
        # Subclasses (IntEnum, namedtuples, ...) would come back as their base type: say so.
        raise UnsupportedValueError(
            f"{where}: values of type {t.__module__}.{t.__qualname__} cannot be stored losslessly"
            " (convert them to a plain int/float/str/list/tuple first)"
        )
    raise UnsupportedValueError(
        f"{where}: values of type {t.__module__}.{t.__qualname__} cannot be stored"
    )


def _json_float(v: Any, where: str) -> float:
    if isinstance(v, str):
        if v not in _NONFINITE:
            raise FormatError(f"{where}: bad float {v!r}")
        return _NONFINITE[v]
    if type(v) not in (int, float):
        raise FormatError(f"{where}: expected a number, got {type(v).__name__}")
    return float(v)


def _check_float_range(values: tuple[Any, ...], dtype: np.dtype, where: str) -> None:
    """Refuses finite numbers that the float (or complex) dtype cannot hold: the writer stores
    exact values of the dtype, so anything larger is corrupt, not a value to round to inf."""
    if dtype.itemsize > (16 if dtype.kind == "c" else 8):
        return  # long double holds every Python float
    limit = float(np.finfo(dtype).max)
    for x in values:
        if math.isfinite(x) and abs(x) > limit:
            raise FormatError(f"{where}: {x!r} out of range for {dtype.str}")


def decode_value(obj: Any, source: ArraySource, where: str = "value", depth: int = 0) -> Any:
    """Decodes a VALUE written by :func:`encode_value`.

    Args:
        obj: the JSON-decoded VALUE.
        source: called with each ARRAY reference object and ``where``; returns the array.
        where: names the value's position in error messages.
        depth: current nesting depth.

    Raises:
        FormatError: for anything that is not a well-formed VALUE.
    """
    if depth > MAX_NESTING:
        raise FormatError(f"{where}: nested deeper than {MAX_NESTING} levels")
    t = type(obj)
    if obj is None or t is bool or t is int or t is float or t is str:
        return obj
    if t is list:
        return [decode_value(v, source, where, depth + 1) for v in obj]
    if t is not dict:
        raise FormatError(f"{where}: unexpected JSON value of type {t.__name__}")
    kind = obj.get("__type")
    if kind is None:
        return {k: decode_value(v, source, where, depth + 1) for k, v in obj.items()}
    if kind == "ndarray":
        return source(obj, where)
    if kind == "float":
        return _json_float(obj.get("value"), where)
    if kind == "scalar":
        dtype = parse_dtype(obj.get("dtype"), where)
        v = obj.get("value")
        if isinstance(v, dict):
            arr = decode_value(v, source, where, depth + 1)
            if not isinstance(arr, np.ndarray) or arr.shape != () or arr.dtype != dtype:
                raise FormatError(f"{where}: scalar array does not match dtype {dtype.str}")
            return arr[()]
        try:
            if dtype.kind == "c":
                if not isinstance(v, list) or len(v) != 2:
                    raise FormatError(f"{where}: complex scalar must be [real, imag]")
                parts = (_json_float(v[0], where), _json_float(v[1], where))
                _check_float_range(parts, dtype, where)
                return dtype.type(complex(*parts))
            if dtype.kind == "f":
                x = _json_float(v, where)
                _check_float_range((x,), dtype, where)
                return dtype.type(x)
            if dtype.kind == "b":
                if type(v) is not bool:
                    raise FormatError(f"{where}: bool scalar must be true or false")
                return dtype.type(v)
            if dtype.kind in "iu":
                if type(v) is not int:
                    raise FormatError(f"{where}: integer scalar must be an integer")
                info = np.iinfo(dtype)
                if not info.min <= v <= info.max:
                    raise FormatError(f"{where}: {v} out of range for {dtype.str}")
                return dtype.type(v)
        except (OverflowError, ValueError, TypeError) as e:
            if isinstance(e, FormatError):
                raise
            raise FormatError(f"{where}: bad scalar {v!r} of dtype {dtype.str}") from e
        raise FormatError(f"{where}: bad scalar of dtype {dtype.str}")
    if kind == "tuple":
        items = obj.get("items")
        if not isinstance(items, list):
            raise FormatError(f"{where}: tuple items must be a list")
        return tuple(decode_value(v, source, where, depth + 1) for v in items)
    if kind == "dict":
        items = obj.get("items")
        if not isinstance(items, list) or not all(isinstance(p, list) and len(p) == 2 for p in items):
            raise FormatError(f"{where}: dict items must be a list of [key, value] pairs")
        out = {}
        for k, v in items:
            key = decode_value(k, source, where, depth + 1)
            try:
                out[key] = decode_value(v, source, where, depth + 1)
            except TypeError as e:
                raise FormatError(f"{where}: unhashable dict key") from e
        return out
    if kind == "bytes":
        text = obj.get("base64")
        if not isinstance(text, str):
            raise FormatError(f"{where}: bytes need a base64 string")
        try:
            return base64.b64decode(text.encode("ascii"), validate=True)
        except (ValueError, UnicodeEncodeError) as e:
            raise FormatError(f"{where}: bad base64") from e
    if kind == "graph":
        from gymnasium.spaces import GraphInstance

        return GraphInstance(
            decode_value(obj.get("nodes"), source, where, depth + 1),
            decode_value(obj.get("edges"), source, where, depth + 1),
            decode_value(obj.get("edge_links"), source, where, depth + 1),
        )
    raise FormatError(f"{where}: unknown __type {kind!r}")


_SCALARS = (type(None), bool, int, float, str, bytes)
# Values kept as they are (immutable, storable): the plain scalars and numpy's scalar types of
# the kinds a VALUE holds (an info of numpy floats is snapshotted without a call per value).
_KEPT = frozenset(_SCALARS) | frozenset(
    np.dtype(c).type for c in "?bhilqBHILQefdgFDG") | {np.str_, np.bytes_}


def snapshot(value: Any, where: str = "value", depth: int = 0) -> Any:
    """Copies the mutable parts of a value (arrays, dicts, lists), checking that it can be stored.

    Raises:
        UnsupportedValueError: naming ``where``, for a value the format cannot hold losslessly.
    """
    t = type(value)
    if t in _SCALARS:
        return value
    if depth > MAX_NESTING:
        raise UnsupportedValueError(f"{where}: nested deeper than {MAX_NESTING} levels")
    if t is np.ndarray:
        if value.dtype.hasobject or value.dtype.kind not in "biufcUS":
            raise UnsupportedValueError(f"{where}: numpy arrays of dtype {value.dtype} cannot be stored")
        return value.copy()
    if t is dict or isinstance(value, dict):
        # A dict subclass (defaultdict, OrderedDict, ...) is kept as a plain dict of its items:
        # its type (and a defaultdict's factory) is not stored.
        return _copy_dict(value, where, depth + 1, str_keys=False)
    if t is list:
        return [snapshot(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if t is tuple:
        return tuple(snapshot(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value))
    if isinstance(value, np.generic):
        if value.dtype.kind not in "biufcUS":
            raise UnsupportedValueError(f"{where}: numpy scalars of dtype {value.dtype} cannot be stored")
        return value
    if t.__name__ == "GraphInstance" and hasattr(value, "edge_links"):
        return t(*(snapshot(v, f"{where}.{n}", depth + 1) for n, v in zip(t._fields, value)))
    raise UnsupportedValueError(
        f"{where}: values of type {t.__module__}.{t.__qualname__} cannot be stored losslessly"
        " (record_infos=False, or info_filter=..., to leave them out)")


def record_info(info: Any, info_filter: Callable[[dict[str, Any]], dict[str, Any]] | None,
                where: str) -> dict[str, Any] | None:
    """The copy of a non-empty info dict to record (after ``info_filter``), or None if empty.

    Raises:
        UnsupportedValueError: if it is not a dict, has a key that is not a str, or holds a
            value the format cannot store (the message names it).
    """
    if info_filter is not None:
        info = info_filter(info)
        if not info:
            return None
    if type(info) is not dict and not isinstance(info, dict):
        raise UnsupportedValueError(f"{where} must be a dict, got {type(info).__name__}")
    return _copy_dict(info, where, 1, str_keys=True)


def _copy_dict(value: dict[Any, Any], where: str, depth: int, str_keys: bool) -> dict[Any, Any]:
    """snapshot of a dict's values (at ``depth``), with the key check of an info dict when
    ``str_keys``; the names of the values are made only for those not kept as they are."""
    copied: dict[Any, Any] = {}
    for key, v in value.items():
        if str_keys and type(key) is not str:
            raise UnsupportedValueError(f"{where}: key {key!r} is not a string")
        copied[key] = v if type(v) in _KEPT else snapshot(v, f"{where}[{key!r}]", depth)
    return copied


def check_metadata(metadata: Any, where: str = "metadata") -> dict[str, Any]:
    """A copy of a recording's ``metadata`` (the manifest key), checked to be plain JSON.

    Args:
        metadata: a dict with str keys whose values are None, bool, int, finite float, str,
            or lists and str-keyed dicts of those (e.g. ``{"algorithm_name": "PPO",
            "author": "me"}``).
        where: names the value in error messages.

    Raises:
        UnsupportedValueError: for anything else, or more than :data:`MAX_METADATA_BYTES`
            bytes of JSON (the message names the first offending value).
    """
    import json

    if not isinstance(metadata, dict):
        raise UnsupportedValueError(f"{where} must be a dict, got {type(metadata).__name__}")
    copied = _plain_json(metadata, where, 0)
    size = len(json.dumps(copied, allow_nan=False).encode("utf-8"))
    if size > MAX_METADATA_BYTES:
        raise UnsupportedValueError(f"{where}: {size:,} bytes of JSON, more than "
                                    f"{MAX_METADATA_BYTES:,}")
    return copied  # type: ignore[no-any-return]


def _plain_json(value: Any, where: str, depth: int) -> Any:
    if depth > MAX_NESTING:
        raise UnsupportedValueError(f"{where}: nested deeper than {MAX_NESTING} levels")
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is float:
        if not math.isfinite(value):
            raise UnsupportedValueError(f"{where}: {value!r} is not a finite number")
        return value
    if isinstance(value, dict):
        for k in value:
            if type(k) is not str:
                raise UnsupportedValueError(f"{where}: key {k!r} is not a string")
        return {k: _plain_json(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}
    if t is list or t is tuple:
        return [_plain_json(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    if isinstance(value, np.generic) and value.dtype.kind in "biuf":
        return _plain_json(value.item(), where, depth)
    raise UnsupportedValueError(f"{where}: values of type {t.__module__}.{t.__qualname__} "
                                f"cannot be metadata (use str, numbers, bools, None, lists, "
                                f"dicts)")


def manifest_metadata(manifest: Any) -> dict[str, Any] | None:
    """A manifest's (or batch header's) ``metadata``: the object, or None where there is none
    or it is not a JSON object (a reader does not trust it further: it is only shown)."""
    if not isinstance(manifest, dict):
        return None
    metadata = manifest.get("metadata")
    return metadata if isinstance(metadata, dict) and metadata else None


def array_refs(value: Any, out: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """Every ARRAY reference (``{"__type": "ndarray", ...}``) inside a JSON value read from a
    batch (an entry, a TREE, a VALUE), in document order, appended to ``out`` (a new list by
    default). The references are not checked here; the walk goes as deep as the value, which
    the format's JSON reader (:func:`~gym_recorder.format.fileio.loads`) bounds."""
    found: list[dict[str, Any]] = [] if out is None else out
    if isinstance(value, dict):
        if value.get("__type") == "ndarray":
            found.append(value)
        else:
            for v in value.values():
                array_refs(v, found)
    elif isinstance(value, list):
        for v in value:
            array_refs(v, found)
    return found
