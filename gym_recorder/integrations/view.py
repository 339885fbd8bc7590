"""``gym-recorder view``: serve a recording and the viewer page that reads its raw files.

The server is read-only and knows nothing of the format: the page (``gym_recorder/integrations/viewer/``)
fetches the manifests, the batch JSON files and byte ranges of the ``.bin`` files and decodes
them itself (``viewer/decode.js``). URLs:

- ``/`` the page; ``/viewer/NAME`` its other files (only the files shipped in the package);
- ``/api/manifests`` a JSON list of the names of DIR's ``*.manifest.json`` regular files (the
  only listing the page needs);
- ``/recording/PATH`` the file at PATH relative to DIR, with ``Range: bytes=...`` support
  (one range; 206 with ``Content-Range``, 416 when it cannot be satisfied), always as data:
  ``application/json`` for ``.json`` files and ``application/octet-stream`` for all others, with
  ``X-Content-Type-Options: nosniff`` and ``Content-Security-Policy: sandbox``, so that an HTML,
  SVG or script file in a recording never runs in the page's origin.

Paths are untrusted: a path with a ``.``/``..`` segment (also percent-encoded), a backslash, a
NUL, an empty segment or a leading ``/`` after the prefix gets 400; one that resolves outside DIR
(a symlink out) or to anything but a regular file gets 403; a missing file 404. Nothing is
listed but the manifests' names. A server bound to a loopback address (the default) answers
only requests whose ``Host`` is a loopback name (127.0.0.1, localhost, [::1]), so that no web
page can reach it through a DNS name of its own (DNS rebinding); others get 403.

This module is the server (binding, host checks, byte counts, ``run``); each request is answered
by :class:`~gym_recorder.integrations.view_handler.ViewHandler`.
"""

from __future__ import annotations

import errno
import http.server
import os
import signal
import sys
import threading
import webbrowser
from typing import Any

from .view_handler import IDLE_TIMEOUT, ViewHandler

__all__ = ["ViewServer", "make_server", "run", "VIEWER_DIR", "ViewHandler", "IDLE_TIMEOUT"]

#: The page's files, shipped in the package.
VIEWER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "viewer")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
# ``run`` without a port tries DEFAULT_PORT, then this many following ports, then any free one.
PORT_TRIES = 10
_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_LOOPBACK_NAMES = {"127.0.0.1", "[::1]", "localhost"}


def _viewer_files() -> dict[str, str]:
    """Maps each shipped page file's name to its path (a fixed whitelist, read at start)."""
    files = {}
    for name in os.listdir(VIEWER_DIR):
        path = os.path.join(VIEWER_DIR, name)
        if os.path.isfile(path) and not name.startswith("."):
            files[name] = path
    return files


class ViewServer(http.server.ThreadingHTTPServer):
    """An HTTP server over one recording directory; counts the recording bytes it sent.

    Attributes:
        directory: the real path of the recording directory.
        bytes_sent: body bytes sent from files under ``/recording/`` since start.
    """

    daemon_threads = True

    def __init__(self, directory: str, address: tuple[str, int]) -> None:
        self.directory = os.path.realpath(directory)
        self.viewer_files = _viewer_files()
        self.bytes_sent = 0
        self._lock = threading.Lock()
        super().__init__(address, ViewHandler)

    @property
    def url(self) -> str:
        """The page's URL."""
        host, port = str(self.server_address[0]), int(self.server_address[1])
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}/"

    def host_allowed(self, host: str | None) -> bool:
        """Whether a request's Host header is acceptable (any, unless bound to loopback)."""
        bound = str(self.server_address[0])
        if bound not in _LOOPBACK:
            return True
        if host is None:
            return False
        name = host.strip().lower()
        port = f":{int(self.server_address[1])}"
        if name.endswith(port):
            name = name[: -len(port)]
        return name in _LOOPBACK_NAMES

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (closed, reset, timed out) is not an error worth a traceback:
        the page reconnects. Anything else is printed as socketserver does."""
        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)

    def count(self, n: int) -> None:
        with self._lock:
            self.bytes_sent += n


def make_server(directory: str | os.PathLike[str], host: str = DEFAULT_HOST,
                port: int = DEFAULT_PORT) -> ViewServer:
    """Creates (does not start) a server for the recording in ``directory``.

    Args:
        directory: the recording directory.
        host: the address to bind (default 127.0.0.1: this machine only).
        port: the port (0 picks a free one).

    Raises:
        FileNotFoundError: if ``directory`` is not a directory.
        OSError: if the address cannot be bound.
    """
    directory = os.fspath(directory)
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"no recording directory {directory!r}")
    return ViewServer(directory, (host, port))


def _interrupt(signum: int, frame: Any) -> None:
    """SIGTERM: stop as Ctrl-C does."""
    raise KeyboardInterrupt


def _bind(directory: str | os.PathLike[str], host: str, port: int | None) -> ViewServer:
    """A server on ``port``; without one, on the first free port from DEFAULT_PORT on (any free
    port after PORT_TRIES busy ones). A busy port that was asked for is a one-line OSError."""
    if port is not None:
        try:
            return make_server(directory, host, port)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
            raise OSError(e.errno, f"port {port} on {host} is in use by another program; "
                                   f"choose another with --port, or --port 0 for any free one"
                          ) from None
    for candidate in [*range(DEFAULT_PORT, DEFAULT_PORT + PORT_TRIES), 0]:
        try:
            return make_server(directory, host, candidate)
        except OSError as e:
            if e.errno != errno.EADDRINUSE:
                raise
    raise AssertionError("unreachable: port 0 is never in use")  # pragma: no cover


def run(directory: str | os.PathLike[str], host: str = DEFAULT_HOST, port: int | None = None,
        open_browser: bool = True) -> int:
    """Serves the viewer until Ctrl-C; prints the URL as the first line of stdout.

    Args:
        directory: the recording directory.
        host: the address to bind.
        port: the port; None (the default) takes DEFAULT_PORT or, when another program holds
            it, the next free one (the URL printed says which).

    Returns:
        0 once stopped by Ctrl-C.

    Raises:
        OSError: if ``port`` was given and is in use (one line, with a hint), or the address
            cannot be bound.
    """
    server = _bind(directory, host, port)
    if port is None and server.server_address[1] != DEFAULT_PORT:
        print(f"port {DEFAULT_PORT} is in use: serving on port {server.server_address[1]}",
              file=sys.stderr, flush=True)
    if threading.current_thread() is threading.main_thread():
        # Ctrl-C (SIGINT) and SIGTERM stop the server cleanly, also when it was started in the
        # background of a non-interactive shell, which starts it with SIGINT ignored.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _interrupt)
    try:
        print(server.url, flush=True)
        if open_browser:
            threading.Thread(target=webbrowser.open, args=(server.url,), daemon=True).start()
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr, flush=True)
    finally:
        server.server_close()
    return 0
