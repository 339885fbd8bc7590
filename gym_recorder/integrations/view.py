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
"""

from __future__ import annotations

import errno
import http.server
import json
import os
import re
import signal
import stat
import sys
import threading
import urllib.parse
import webbrowser
from typing import Any

from ..format import MANIFEST_SUFFIX

__all__ = ["ViewServer", "make_server", "run", "VIEWER_DIR"]

#: The page's files, shipped in the package.
VIEWER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "viewer")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
# ``run`` without a port tries DEFAULT_PORT, then this many following ports, then any free one.
PORT_TRIES = 10
# Bytes copied per write when sending a file: big enough to be cheap, small enough for memory.
CHUNK = 1 << 20
# Longest URL path accepted (anything longer is a 400): far beyond any recording's file names.
MAX_PATH_CHARS = 4096
# A connection that sends nothing (no request, or half of one) for this many seconds is closed,
# so that idle or slow clients do not hold the server's threads (browsers reconnect).
IDLE_TIMEOUT = 30.0
_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".json": "application/json",
    ".png": "image/png",
    ".svg": "image/svg+xml",
}
_RANGE_RE = re.compile(r"bytes=([0-9]*)-([0-9]*)")
_LOOPBACK = {"127.0.0.1", "::1", "localhost"}
_LOOPBACK_NAMES = {"127.0.0.1", "[::1]", "localhost"}


class _Refused(Exception):
    """A request refused with an HTTP status (400, 403, 404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _viewer_files() -> dict[str, str]:
    """Maps each shipped page file's name to its path (a fixed whitelist, read at start)."""
    files = {}
    for name in os.listdir(VIEWER_DIR):
        path = os.path.join(VIEWER_DIR, name)
        if os.path.isfile(path) and not name.startswith("."):
            files[name] = path
    return files


def _clean_segments(raw: str) -> list[str]:
    """Splits a raw (still percent-encoded) URL path into decoded segments, refusing tricks."""
    if len(raw) > MAX_PATH_CHARS:
        raise _Refused(400, "path too long")
    segments = []
    for part in raw.split("/"):
        seg = urllib.parse.unquote(part, errors="strict")
        if seg in ("", ".", "..") or "/" in seg or "\\" in seg or "\x00" in seg:
            raise _Refused(400, f"bad path segment {part!r}")
        segments.append(seg)
    return segments


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


class ViewHandler(http.server.BaseHTTPRequestHandler):
    """GET/HEAD of the page, the manifest list and the recording's files (with Range)."""

    server: ViewServer
    protocol_version = "HTTP/1.1"
    server_version = "gym-recorder-view"
    timeout = IDLE_TIMEOUT  # (socketserver sets it on each connection)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002  (the base's name)
        pass  # quiet: stdout carries the URL only, and errors go back to the page

    def do_HEAD(self) -> None:  # noqa: N802  (http.server's naming)
        self._handle(body=False)

    def do_GET(self) -> None:  # noqa: N802
        self._handle(body=True)

    def _handle(self, body: bool) -> None:
        try:
            hosts = self.headers.get_all("Host") or []
            if len(hosts) != 1 or not self.server.host_allowed(hosts[0]):
                # A page elsewhere must not reach a loopback server through a DNS name it
                # controls (DNS rebinding): loopback servers answer only loopback names.
                raise _Refused(403, "unexpected Host header")
            raw = urllib.parse.urlsplit(self.path).path
            if not raw.startswith("/"):
                raise _Refused(400, "the path must start with /")
            if raw == "/":
                self._send_file(self.server.viewer_files["index.html"], body)
            elif raw == "/api/manifests":
                self._send_bytes(json.dumps(self._manifests()).encode(), "application/json", body)
            elif raw.startswith("/viewer/"):
                (name,) = _clean_segments(raw[len("/viewer/"):]) or [""]
                path = self.server.viewer_files.get(name)
                if path is None:
                    raise _Refused(404, "no such page file")
                self._send_file(path, body)
            elif raw.startswith("/recording/"):
                self._send_file(self._recording_path(raw[len("/recording/"):]), body,
                                counted=True)
            else:
                raise _Refused(404, "not found")
        except _Refused as e:
            self._refuse(e.status, str(e), body)
        except ValueError as e:  # several segments under /viewer/, bad percent-encoding
            self._refuse(400, f"bad path: {e}", body)
        except ConnectionError:  # the client went away mid-answer (BrokenPipe, reset, aborted)
            self.close_connection = True

    def _refuse(self, status: int, message: str, body: bool) -> None:
        """Sends an error answer; a client that already went away gets none (and no traceback)."""
        try:
            self._send_error(status, message, body)
        except ConnectionError:
            self.close_connection = True

    def _manifests(self) -> list[str]:
        names = []
        with os.scandir(self.server.directory) as it:
            for e in it:
                if e.name.endswith(MANIFEST_SUFFIX) and e.is_file(follow_symlinks=False):
                    names.append(e.name)
        return sorted(names)

    def _recording_path(self, raw: str) -> str:
        segments = _clean_segments(raw)
        root = self.server.directory
        path = os.path.realpath(os.path.join(root, *segments))
        if os.path.commonpath([root, path]) != root or path == root:
            raise _Refused(403, "outside the recording directory")
        return path

    def _send_error(self, status: int, message: str, body: bool) -> None:
        data = (message + "\n").encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _send_bytes(self, data: bytes, ctype: str, body: bool) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _send_file(self, path: str, body: bool, counted: bool = False) -> None:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
                         | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            raise _Refused(404, "no such file") from None
        except OSError:
            raise _Refused(403, "cannot open that file") from None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            raise _Refused(403, "not a regular file")
        with os.fdopen(fd, "rb") as f:
            size = st.st_size
            start, end = 0, size  # [start, end)
            status = 200
            header = self.headers.get("Range")
            if header is not None:
                rng = self._parse_range(header, size)
                if rng == "unsatisfiable":
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if isinstance(rng, tuple):
                    start, end = rng
                    status = 206
            self.send_response(status)
            ext = os.path.splitext(path)[1].lower()
            if counted:  # a recording's file is data, whatever its name says
                ctype = "application/json" if ext == ".json" else "application/octet-stream"
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Content-Security-Policy", "sandbox")
            else:
                ctype = _CONTENT_TYPES.get(ext, "application/octet-stream")
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(end - start))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("Cache-Control", "no-cache")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end - 1}/{size}")
            self.end_headers()
            if not body:
                return
            f.seek(start)
            left = end - start
            while left > 0:
                chunk = f.read(min(CHUNK, left))
                if not chunk:
                    break  # the file shrank while being sent; the client sees a short body
                self.wfile.write(chunk)
                left -= len(chunk)
                if counted:
                    self.server.count(len(chunk))

    @staticmethod
    def _parse_range(header: str, size: int) -> tuple[int, int] | str | None:
        """One ``bytes=a-b`` range as [start, end), "unsatisfiable", or None to send it all.

        Malformed headers and several ranges are ignored (RFC 9110 allows it): the whole file.
        """
        m = _RANGE_RE.fullmatch(header.strip())
        if m is None or (not m.group(1) and not m.group(2)):
            return None
        first, last = m.group(1), m.group(2)
        if len(first) > 4000 or len(last) > 4000:  # (int() refuses longer: ignored as malformed)
            return None
        if first:
            start = int(first)
            end = min(int(last) + 1, size) if last else size
            if last and int(last) < start:
                return None
            if start >= size:
                return "unsatisfiable"
            return start, end
        suffix = int(last)
        if suffix == 0 or size == 0:  # RFC 9110: no suffix of an empty file
            return "unsatisfiable"
        return max(size - suffix, 0), size


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
