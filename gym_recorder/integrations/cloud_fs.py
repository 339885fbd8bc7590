"""Reaching an fsspec filesystem: open a URL with bounded S3 timeouts, and name its errors.

:func:`open_fs` makes the filesystem of a URL (``storage_options`` passed on); :func:`storage_error`
turns what a filesystem raises into gym_recorder's named error for that URL: a missing object is
a :class:`~gym_recorder.errors.FormatError`, an unreachable URL or refused credentials a
:class:`~gym_recorder.errors.StorageError`.
"""

from __future__ import annotations

from typing import Any

from ..errors import FormatError, RecorderError, StorageError, install_hint

__all__ = ["S3_CONFIG", "S3_OPTIONS", "open_fs", "storage_error"]

# Error names of botocore / aiohttp / requests that mean "could not connect"; matched by name so
# that this module imports none of them.
_UNREACHABLE_NAMES = ("EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError",
                      "ClientConnectorError", "ServerDisconnectedError", "ConnectionError",
                      "ConnectTimeout", "ClientOSError")
_CREDENTIAL_NAMES = ("NoCredentialsError", "PartialCredentialsError", "CredentialRetrievalError",
                     "InvalidAccessKeyId", "SignatureDoesNotMatch", "AccessDenied", "Forbidden")


def _fsspec() -> Any:
    try:
        import fsspec
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(f"reading or writing a URL needs fsspec: {install_hint('cloud')} "
                          f"({e})") from e
    return fsspec


def storage_error(e: BaseException, url: str, doing: str) -> RecorderError:
    """Turns an exception of an fsspec filesystem into gym_recorder's named error for ``url``.

    Args:
        e: what the filesystem raised.
        url: the URL it was about.
        doing: what was being done, e.g. ``"reading"``.

    Returns:
        A :class:`FormatError` for a missing object, a :class:`StorageError` otherwise.
    """
    if isinstance(e, RecorderError):
        return e
    chain: list[BaseException] = []
    cur: BaseException | None = e
    while cur is not None and len(chain) < 8:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    names = " ".join(type(c).__name__ + " " + str(c) for c in chain)
    detail = " ".join(str(e).split()) or type(e).__name__
    if isinstance(e, FileNotFoundError):
        return FormatError(f"{url}: no such object ({doing})")
    if isinstance(e, PermissionError) or any(n in names for n in _CREDENTIAL_NAMES):
        return StorageError(f"{url}: credentials refused while {doing} ({detail})")
    if any(isinstance(c, (ConnectionError, TimeoutError))
           or type(c).__name__ in _UNREACHABLE_NAMES for c in chain):  # (also as a cause)
        return StorageError(f"{url}: cannot be reached ({detail})")
    return StorageError(f"{url}: {doing} failed ({type(e).__name__}: {detail})")


# S3 timeouts and retries unless storage_options say otherwise. s3fs's defaults (a 15 s read
# timeout, 5 attempts of its own, each of botocore's 5) keep a client waiting about 7 minutes on
# an endpoint that accepts connections but never answers; these bound it to about 40 s (4 tries
# of 10 s). s3fs's own attempts back off and retry throttling ("SlowDown") as before.
S3_OPTIONS: dict[str, Any] = {"retries": 4}
S3_CONFIG: dict[str, Any] = {"connect_timeout": 5, "read_timeout": 10,
                             "retries": {"max_attempts": 1, "mode": "standard"}}


def open_fs(url: str, storage_options: dict[str, Any] | None) -> tuple[Any, str]:
    """``fsspec.core.url_to_fs`` with bounded S3 timeouts by default (:data:`S3_OPTIONS`,
    :data:`S3_CONFIG`; a key given in ``storage_options`` or its ``config_kwargs`` wins).

    Raises:
        TypeError: if ``storage_options`` is not a dict (or None).
        StorageError: if fsspec cannot make a filesystem for the URL (unknown protocol, a
            missing s3fs, bad options).
    """
    if storage_options is not None and not isinstance(storage_options, dict):
        raise TypeError(f"storage_options must be a dict, got {type(storage_options).__name__}")
    options = dict(storage_options or {})
    s3 = url.split("://", 1)[0].lower() in ("s3", "s3a")
    if s3:
        config = dict(options.get("config_kwargs") or {})
        for key, value in S3_CONFIG.items():
            config.setdefault(key, value)
        options["config_kwargs"] = config
    try:
        fs, root = _fsspec().core.url_to_fs(url, **options)
    except (ImportError, ValueError, TypeError) as e:
        raise StorageError(f"{url}: cannot open ({type(e).__name__}: {e})") from e
    if s3:  # (s3fs takes its number of attempts as an attribute, not an option)
        for key, value in S3_OPTIONS.items():
            if key not in (storage_options or {}) and hasattr(fs, key):
                setattr(fs, key, value)
    return fs, root
