"""`make run`'s front (rag_site/front.py, deploy/Caddyfile) before a stand-in
web server on its unix socket: slow clients wait in the front, web sees the
real client address whatever the client claims, and an over-long request
line under /api/ gets a JSON error."""

import http.client
import json
import socket
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from rag_site.front import front_plan, listen_address
from tests.conftest import wait_for

pytestmark = pytest.mark.unit


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class StandIn:
    """What web received: the forwarding headers of each request."""

    requests: list[dict[str, str]] = field(default_factory=list)


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


def stand_in_serve(socket_path: Path, seen: StandIn) -> _UnixHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer()

        def _answer(self) -> None:
            headers = {name: self.headers.get(name, "") for name in ("X-Forwarded-For", "X-Forwarded-Proto", "Host")}
            seen.requests.append({"path": self.path, **headers})
            body = json.dumps(headers).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:  # a unix socket has no client address to log
            pass

    server = _UnixHTTPServer(str(socket_path), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@dataclass
class RunningFront:
    port: int
    seen: StandIn


def front_start(tmp_path: Path, *, trust_proxy_headers: bool) -> Iterator[RunningFront]:
    port = free_port()
    plan = front_plan(bind=f"127.0.0.1:{port}", var_dir=tmp_path / "var", trust_proxy_headers=trust_proxy_headers)
    seen = StandIn()
    server = stand_in_serve(Path(plan.web_bind.removeprefix("unix:")), seen)
    log = open(tmp_path / "front.log", "wb")  # noqa: SIM115 - closed below
    caddy = subprocess.Popen(plan.argv, env=plan.env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: request(port, "GET", "/")[0] == 200 or caddy.poll() is not None, timeout=30, what="the front")
        assert caddy.poll() is None, (tmp_path / "front.log").read_text()
        yield RunningFront(port=port, seen=seen)
    finally:
        caddy.terminate()
        caddy.wait(timeout=30)
        log.close()
        server.shutdown()
        server.server_close()


@pytest.fixture
def front(tmp_path) -> Iterator[RunningFront]:
    yield from front_start(tmp_path, trust_proxy_headers=False)


@pytest.fixture
def front_behind_a_local_proxy(tmp_path) -> Iterator[RunningFront]:
    yield from front_start(tmp_path, trust_proxy_headers=True)


def request(port: int, method: str, target: str, headers: dict[str, str] | None = None) -> tuple[int, str, str]:
    """Status, Content-Type and body; (0, "", "") when nothing answered."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, target, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", "").split(";")[0], response.read().decode()
    except OSError:
        return 0, "", ""
    finally:
        connection.close()


def test_web_sees_the_client_address_not_the_one_the_client_claims(front):
    status, _, body = request(front.port, "GET", "/", {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https"})

    assert status == 200
    assert json.loads(body) == {
        "X-Forwarded-For": "127.0.0.1",
        "X-Forwarded-Proto": "http",
        "Host": f"127.0.0.1:{front.port}",
    }


def test_behind_a_local_proxy_web_sees_the_address_that_proxy_added(front_behind_a_local_proxy):
    port = front_behind_a_local_proxy.port
    # The local proxy appended the address it saw to what the client claimed.
    status, _, body = request(
        port, "GET", "/", {"X-Forwarded-For": "198.51.100.1, 203.0.113.9", "X-Forwarded-Proto": "https"}
    )

    assert status == 200
    assert json.loads(body)["X-Forwarded-For"] == "203.0.113.9"
    assert json.loads(body)["X-Forwarded-Proto"] == "https"


def test_slow_clients_wait_in_the_front_and_others_are_served(front):
    slow = [socket.create_connection(("127.0.0.1", front.port)) for _ in range(8)]
    try:
        for connection in slow[:4]:
            connection.sendall(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        for connection in slow[4:]:
            connection.sendall(b"POST /slow HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000\r\n\r\npartial body")

        assert request(front.port, "GET", "/api/v1/health")[0] == 200
        assert not [seen for seen in front.seen.requests if seen["path"] == "/slow"]
    finally:
        for connection in slow:
            connection.close()


def test_a_body_reaches_web_once_it_has_fully_arrived(front):
    connection = http.client.HTTPConnection("127.0.0.1", front.port, timeout=30)
    connection.request("POST", "/upload", body=b"x" * 100_000)

    assert connection.getresponse().status == 200
    connection.close()


def test_an_over_long_request_line_under_the_api_gets_a_json_error(front):
    status, content_type, body = request(front.port, "GET", "/api/v1/search?q=" + "a" * 5000)

    assert (status, content_type) == (414, "application/json")
    assert "too long" in json.loads(body)["error"]
    assert not front.seen.requests[1:]  # only the start-up probe reached web


def test_a_long_request_line_within_the_limit_reaches_web(front):
    assert request(front.port, "GET", "/api/v1/search?q=" + "a" * 3000)[0] == 200


@pytest.mark.parametrize("bind", ["8000", "localhost", "unix:/tmp/web.sock", "127.0.0.1:99999", "127.0.0.1:http"])
def test_a_bind_that_is_not_host_and_port_is_refused(bind):
    with pytest.raises(ImproperlyConfigured, match="RAG_BIND"):
        listen_address(bind)


def test_bind_hosts_are_read_as_the_front_listens():
    assert listen_address("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert listen_address("[::1]:8080") == ("::1", 8080)
    assert listen_address(":8000") == ("", 8000)
