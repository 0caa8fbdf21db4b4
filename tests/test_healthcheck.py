"""docker-compose's health checks (rag_site/healthcheck.py) against a real
HTTP server and a real heartbeat file. The same commands run against `make
run` in tests/test_make_run.py."""

import http.server
import os
import threading
import time

import pytest

from rag_site import healthcheck

pytestmark = pytest.mark.unit


@pytest.fixture
def server():
    """A local HTTP server answering each path with the status it names (/200, /302, /500)."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(dict(self.headers))
            status = int(self.path.strip("/"))
            self.send_response(status)
            if status == 302:
                self.send_header("Location", "/200")
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", seen
    httpd.shutdown()
    httpd.server_close()


def test_web_is_healthy_on_200_and_asks_as_the_proxy_does(server, monkeypatch):
    base, seen = server
    monkeypatch.setenv("ALLOWED_HOSTS", ".example.org,rag.example.com")
    assert healthcheck.web_check(base + "/200") is None
    assert seen[0]["Host"] == "example.org"
    assert seen[0]["X-Forwarded-Proto"] == "https"


def test_web_is_unhealthy_on_an_error_a_redirect_or_no_answer(server):
    base, _ = server
    assert healthcheck.web_check(base + "/500") == f"{base}/500 answered 500"
    assert healthcheck.web_check(base + "/302") == f"{base}/302 answered 302"  # e.g. to https: not followed
    with socket_closed() as url:
        assert healthcheck.web_check(url).startswith(url)


class socket_closed:
    """The URL of a port nothing listens on."""

    def __enter__(self):
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            return f"http://127.0.0.1:{sock.getsockname()[1]}/"

    def __exit__(self, *exc):
        return False


def test_beat_is_healthy_while_its_heartbeat_is_fresh(tmp_path):
    assert healthcheck.beat_check(var_dir=tmp_path).startswith("no beat heartbeat")
    heartbeat = healthcheck.beat_heartbeat_path(tmp_path)
    heartbeat.touch()
    assert healthcheck.beat_check(var_dir=tmp_path) is None
    old = time.time() - healthcheck.BEAT_MAX_AGE_SECONDS - 5
    os.utime(heartbeat, (old, old))
    assert "s old" in healthcheck.beat_check(var_dir=tmp_path)


def test_the_command_exits_non_zero_when_unhealthy(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RAG_VAR_DIR", str(tmp_path))
    assert healthcheck.main(["beat"]) == 1
    assert "no beat heartbeat" in capsys.readouterr().err
    healthcheck.beat_heartbeat_path(tmp_path).touch()
    assert healthcheck.main(["beat"]) == 0
