"""Answering one request of ``gym-recorder view`` (:class:`ViewHandler`): the page, the manifest
list, and the recording's files with ``Range`` support; untrusted paths refused.

The URLs and the rules for paths are those of :mod:`gym_recorder.integrations.view` (the
server); this module knows nothing of the format beyond manifest and edit-log names.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import stat
import urllib.parse
from typing import TYPE_CHECKING, Any

from ..errors import RecorderError
from ..format import MANIFEST_SUFFIX
from ..format.edits import EDITS_MANIFEST

if TYPE_CHECKING:
    from .view import ViewServer

__all__ = ["IDLE_TIMEOUT", "ViewHandler"]

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


class _Refused(Exception):
    """A request refused with an HTTP status (400, 403, 404)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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
            elif raw == "/api/edits":
                self._send_bytes(json.dumps(self._edits()).encode(), "application/json", body)
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
        hidden = self._hidden_writers(names)
        return sorted(n for n in names if n not in hidden)

    def _hidden_writers(self, names: list[str]) -> set[str]:
        """Manifests the edit record hides (its tripwire; writers replaced, pending, or a
        compaction's output it does not name): the page shows the edited recording."""
        if EDITS_MANIFEST not in names:
            return set()
        from ..edit.health import skip_manifest
        from ..format.fileio import read_json_file

        state = self._edit_state()
        hidden = set()
        for name in names:
            try:
                doc = read_json_file(os.path.join(self.server.directory, name), name)[1]
            except (RecorderError, OSError):
                doc = None
            if skip_manifest(name, doc, state):
                hidden.add(name)
        return hidden

    def _edit_state(self) -> Any:
        from ..read.manifest import load_edits
        from ..read.storage import LocalStorage

        storage = LocalStorage(self.server.directory)
        try:
            return load_edits(storage)
        finally:
            storage.close()

    def _edits(self) -> dict[str, list[list[int]]]:
        """The deleted episodes' ranges per writer (see "Edits" in the spec)."""
        return dict(self._edit_state().deleted)

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
