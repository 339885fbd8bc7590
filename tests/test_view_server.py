"""The ``gym-recorder view`` server: only DIR's files, exact byte ranges, clean start and stop."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import gymnasium as gym
import pytest

from gym_recorder import RecordingWrapper
from gym_recorder.integrations.view import make_server

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    rec = tmp_path_factory.mktemp("view") / "rec"
    env = RecordingWrapper(gym.make("CartPole-v1"), rec)
    for seed in range(3):
        env.reset(seed=seed)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done = term or trunc
    env.close()
    (rec.parent / "secret.txt").write_text("SECRET-CONTENT")
    os.symlink(rec.parent / "secret.txt", rec / "link-out.bin")
    os.symlink(rec.parent, rec / "dir-out")
    (rec / "sub").mkdir()
    (rec / "sub" / "inner.txt").write_text("inner")
    os.symlink(rec / "sub" / "inner.txt", rec / "link-in.txt")
    os.mkfifo(rec / "fifo.bin")
    return rec


@pytest.fixture(scope="module")
def server(recording):
    srv = make_server(recording, port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join(10)


def request(server, path: str, headers: dict | None = None, method: str = "GET"):
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.putrequest(method, path, skip_accept_encoding=True,
                        skip_host="Host" in (headers or {}))
        for k, v in (headers or {}).items():
            conn.putheader(k, v)
        conn.endheaders()
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def a_bin(recording: Path) -> Path:
    return sorted(recording.glob("*.ep*.bin"))[0]


@pytest.mark.parametrize("path", [
    "/recording/../secret.txt",
    "/recording/%2e%2e/secret.txt",
    "/recording/%2E%2E%2Fsecret.txt",
    "/recording/sub/../../secret.txt",
    "/recording/./sub/inner.txt",
    "/recording//etc/passwd",
    "/recording/%2Fetc%2Fpasswd",
    "/recording/..%5csecret.txt",
    "/recording/a%00b",
    "/recording/%ff",
    "/viewer/../view.py",
    "/viewer/%2e%2e/view.py",
])
def test_traversal_is_refused(server, path):
    status, _, body = request(server, path)
    assert status == 400, (path, status, body)
    assert b"SECRET" not in body


@pytest.mark.parametrize("path, status", [
    ("/recording/link-out.bin", 403),      # a symlink out of DIR
    ("/recording/dir-out/secret.txt", 403),
    ("/recording/fifo.bin", 403),          # not a regular file (and must not hang)
    ("/recording/sub", 403),               # no directory listings
    ("/recording/", 400),
    ("/recording/no-such.bin", 404),
    ("/etc/passwd", 404),
    ("/viewer/no-such.js", 404),
    ("/viewer/sub/decode.js", 400),
])
def test_outside_or_not_a_file(server, path, status):
    got, _, body = request(server, path)
    assert got == status, (path, got, body)
    assert b"SECRET" not in body


def test_files_inside_are_served(server, recording):
    status, headers, body = request(server, "/recording/sub/inner.txt")
    assert (status, body) == (200, b"inner")
    status, _, body = request(server, "/recording/link-in.txt")  # a symlink that stays inside
    assert (status, body) == (200, b"inner")
    manifest = sorted(recording.glob("*.manifest.json"))[0]
    status, headers, body = request(server, "/recording/" + manifest.name)
    assert status == 200 and body == manifest.read_bytes()
    assert headers["Content-Type"] == "application/json"


def test_manifest_list_is_the_only_listing(server, recording):
    status, headers, body = request(server, "/api/manifests")
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert json.loads(body) == sorted(p.name for p in recording.glob("*.manifest.json"))


def test_page_and_modules(server):
    status, headers, body = request(server, "/")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b'src="/viewer/app.js"' in body
    for name in ("app.js", "decode.js", "data.js", "charts.js"):
        status, headers, body = request(server, "/viewer/" + name)
        assert status == 200 and headers["Content-Type"].startswith("text/javascript"), name
        assert b"export" in body or b"import" in body


@pytest.mark.parametrize("spec, lo, hi", [
    ("bytes=0-0", 0, 1), ("bytes=8-23", 8, 24), ("bytes=16-", 16, None), ("bytes=-10", -10, None),
    ("bytes=3-1000000000", 3, None),
])
def test_range_returns_exactly_the_bytes(server, recording, spec, lo, hi):
    path = a_bin(recording)
    data = path.read_bytes()
    want = data[lo:hi]
    status, headers, body = request(server, "/recording/" + path.name, {"Range": spec})
    assert status == 206
    assert body == want
    start = lo if lo >= 0 else len(data) + lo
    assert headers["Content-Range"] == f"bytes {start}-{start + len(want) - 1}/{len(data)}"
    assert headers["Content-Length"] == str(len(want))


def test_range_unsatisfiable_and_ignored(server, recording):
    path = a_bin(recording)
    size = path.stat().st_size
    url = "/recording/" + path.name
    status, headers, body = request(server, url, {"Range": f"bytes={size}-"})
    assert status == 416 and headers["Content-Range"] == f"bytes */{size}" and body == b""
    status, headers, body = request(server, url, {"Range": "bytes=-0"})
    assert status == 416
    for ignored in ("bytes=5-2", "items=0-3", "bytes=0-1,4-5"):  # RFC 9110: send it all
        status, _, body = request(server, url, {"Range": ignored})
        assert status == 200 and body == path.read_bytes(), ignored
    status, headers, body = request(server, url, {"Range": "bytes=0-7"}, method="HEAD")
    assert status == 206 and body == b"" and headers["Content-Length"] == "8"


@pytest.mark.parametrize("host, status", [
    ("evil.example:{port}", 403), ("127.0.0.1.evil.example", 403), ("localhost:{port}", 200),
    ("127.0.0.1:{port}", 200), ("LOCALHOST", 200),
])
def test_loopback_server_answers_only_loopback_names(server, host, status):
    got, _, body = request(server, "/api/manifests",
                           {"Host": host.format(port=server.server_address[1])})
    assert got == status, body


def test_bytes_sent_counts_recording_bodies(server, recording):
    path = a_bin(recording)
    before = server.bytes_sent
    request(server, "/recording/" + path.name, {"Range": "bytes=8-39"})
    request(server, "/")  # the page is not counted
    assert server.bytes_sent - before == 32


def run_cli(*args: str, **kw) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "gym_recorder", "view", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            **kw)


def test_cli_prints_the_url_first_and_ctrl_c_exits_0(recording):
    proc = run_cli(str(recording), "--port", "0", "--no-browser")
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/")
        host, port = url[len("http://"):-1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/api/manifests")
        assert json.loads(conn.getresponse().read()) == sorted(
            p.name for p in recording.glob("*.manifest.json"))
        conn.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_started_with_sigint_ignored_it_still_stops_cleanly(recording, sig):
    # (what `gym-recorder view DIR &` in a script does: the shell starts it with SIGINT ignored)
    proc = run_cli(str(recording), "--port", "0", "--no-browser",
                   preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        assert proc.stdout.readline().startswith("http://127.0.0.1:")
        proc.send_signal(sig)
        assert proc.wait(20) == 0
        assert proc.stderr.read().strip().endswith("stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_cli_missing_dir_is_one_line(tmp_path):
    proc = run_cli(str(tmp_path / "nope"), "--no-browser")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1
    assert out == ""
    assert err.count("\n") == 1 and "nope: no such directory" in err


def test_cli_help_has_examples(capsys):
    from gym_recorder import cli

    with pytest.raises(SystemExit) as e:
        cli.main(["view", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: gym-recorder view")
    assert "examples:\n  gym-recorder view" in out
    for option in ("--port", "--host", "--no-browser"):
        assert option in out


def test_a_recordings_html_or_svg_is_served_as_data(tmp_path):
    """An .html, .svg or .js file in a recording was served as text/html (and so on) from the
    page's origin: opened, its script ran there. Now every recording file is data."""
    (tmp_path / "x.html").write_text("<script>window.ran = 1</script>")
    (tmp_path / "x.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" onload="x()"/>')
    (tmp_path / "x.js").write_text("x()")
    (tmp_path / "x.manifest.json").write_text("{}")
    srv = make_server(tmp_path, port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        for name, ctype in (("x.html", "application/octet-stream"),
                            ("x.svg", "application/octet-stream"),
                            ("x.js", "application/octet-stream"),
                            ("x.manifest.json", "application/json")):
            status, headers, _ = request(srv, "/recording/" + name)
            assert status == 200 and headers["Content-Type"] == ctype, name
            assert headers["X-Content-Type-Options"] == "nosniff"
            assert headers["Content-Security-Policy"] == "sandbox"
        status, headers, _ = request(srv, "/")  # the page itself is still a page
        assert headers["Content-Type"].startswith("text/html")
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(10)


def test_ranges_of_an_empty_file_and_of_huge_numbers(tmp_path, recording, server):
    """A suffix range of an empty file got 206 with "Content-Range: bytes 0--1/0" (not HTTP);
    it is unsatisfiable. A range number of 5000 digits got 400 "bad path: Exceeds the limit"
    (int() refuses it); it is a malformed Range header, ignored."""
    path = a_bin(recording)
    url = "/recording/" + path.name
    status, _, body = request(server, url, {"Range": "bytes=" + "9" * 5000 + "-"})
    assert status == 200 and body == path.read_bytes()
    status, _, body = request(server, url, {"Range": "bytes=0-" + "9" * 5000})
    assert status == 200 and body == path.read_bytes()
    (tmp_path / "empty.bin").write_bytes(b"")
    srv = make_server(tmp_path, port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        status, headers, body = request(srv, "/recording/empty.bin", {"Range": "bytes=-5"})
        assert status == 416 and headers["Content-Range"] == "bytes */0" and body == b""
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(10)


def test_an_idle_or_half_sent_request_is_closed_after_the_timeout(recording, monkeypatch):
    """A client that connects and sends nothing, or half a request line, does not keep a server
    thread: the connection is closed after ViewHandler.timeout seconds."""
    import socket
    import time

    from gym_recorder.integrations import view

    assert view.ViewHandler.timeout == view.IDLE_TIMEOUT == 30.0
    monkeypatch.setattr(view.ViewHandler, "timeout", 0.5)  # (the same code path, sooner)
    srv = make_server(recording, port=0)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        for sent in (b"", b"GET /index.html HT"):
            with socket.create_connection(srv.server_address[:2], timeout=10) as s:
                s.sendall(sent)
                start = time.monotonic()
                assert s.recv(1024) == b""  # closed by the server
                assert time.monotonic() - start < 5
    finally:
        srv.shutdown()
        srv.server_close()
        thread.join(10)


def _hold_port() -> tuple[object, int]:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    return s, s.getsockname()[1]


def test_a_busy_port_asked_for_is_one_line_with_a_hint(recording):
    holder, port = _hold_port()
    try:
        proc = run_cli(str(recording), "--port", str(port), "--no-browser")
        out, err = proc.communicate(timeout=60)
    finally:
        holder.close()
    assert proc.returncode == 1 and out == ""
    assert err.count("\n") == 1, err
    assert f"port {port} on 127.0.0.1 is in use" in err and "--port 0" in err


def test_a_busy_default_port_falls_back_to_a_free_one(recording):
    from gym_recorder.integrations import view

    import socket

    holders = []
    for p in range(view.DEFAULT_PORT, view.DEFAULT_PORT + view.PORT_TRIES):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            s.listen(1)
            holders.append(s)
        except OSError:  # already in use by someone else: busy all the same
            s.close()
    try:
        server = view._bind(recording, "127.0.0.1", None)
        try:
            port = server.server_address[1]
            assert not view.DEFAULT_PORT <= port < view.DEFAULT_PORT + view.PORT_TRIES
            assert server.url == f"http://127.0.0.1:{port}/"
        finally:
            server.server_close()
    finally:
        for s in holders:
            s.close()


def test_clients_that_drop_before_the_answer_print_no_traceback(recording):
    import socket
    import struct
    import time

    proc = run_cli(str(recording), "--port", "0", "--no-browser")
    try:
        url = proc.stdout.readline().strip()
        host, port = url[len("http://"):-1].split(":")
        for i in range(60):
            s = socket.create_connection((host, int(port)), timeout=10)
            # A reset (not a FIN) on close: the server's answer hits a dead connection.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            path = "/recording/../x" if i % 3 == 0 else "/nope" if i % 3 == 1 else \
                "/recording/" + next(recording.glob("*.bin")).name
            s.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
            if i % 2:
                s.sendall(b"GET /half")  # half a request, then gone
            s.close()
        time.sleep(0.5)
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/api/manifests")
        assert conn.getresponse().status == 200  # still serving
        conn.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        err = proc.stderr.read()
        assert "Traceback" not in err and "Error" not in err, err
        assert err.strip() == "stopped"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
