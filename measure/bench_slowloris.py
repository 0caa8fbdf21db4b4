"""`rag_bench slowloris --url URL`: do health probes still answer beside slow clients?

N connections each send the start of a request and then one more header
line (or one more byte of a declared body) every few seconds, never
finishing; a connection the server drops is opened again, as an attacker
would. Meanwhile health probes go out one by one, each with a timeout. The
report: how many probes answered, their latency, and how often the server
dropped a slow connection. Bounded: it ends after the last probe, and
loopback only.
"""

import http.client
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError

from kernel.errors import ApplicationError

LOOPBACK = ("127.0.0.1", "localhost", "::1")
TRICKLES = ("headers", "body")
SLOW_PATH = "/accounts/login/"  # a page every server has; a body is read there before any view answers


@dataclass(frozen=True, slots=True)
class SlowlorisOptions:
    url: str
    connections: int = 8
    interval: float = 5.0  # seconds between a slow connection's sends (the attack run used 5)
    trickle: str = "headers"
    probes: int = 4
    probe_timeout: float = 10.0
    probe_path: str = "/api/v1/health"

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme != "http" or parts.hostname not in LOOPBACK:
            raise ApplicationError(
                f"--url must be an http server on loopback (http://127.0.0.1:PORT), got {self.url!r}"
            )
        if not 1 <= self.connections <= 256:
            raise ApplicationError(f"--connections must be 1 to 256, got {self.connections}")
        if not 0.1 <= self.interval <= 60:
            raise ApplicationError(f"--interval must be 0.1 to 60 seconds, got {self.interval}")
        if self.trickle not in TRICKLES:
            raise ApplicationError(f"--trickle must be one of {', '.join(TRICKLES)}, got {self.trickle!r}")
        if not 1 <= self.probes <= 100:
            raise ApplicationError(f"--probes must be 1 to 100, got {self.probes}")
        if not 0.1 <= self.probe_timeout <= 120:
            raise ApplicationError(f"--probe-timeout must be 0.1 to 120 seconds, got {self.probe_timeout}")

    @property
    def address(self) -> tuple[str, int]:
        parts = urlsplit(self.url)
        return parts.hostname or "127.0.0.1", parts.port or 80


@dataclass
class _Attack:
    """The slow connections, kept at N by one thread until told to stop."""

    options: SlowlorisOptions
    stop: threading.Event = field(default_factory=threading.Event)
    opened: int = 0
    dropped: int = 0  # connections the server closed or answered: it gave up waiting for them
    open_failures: int = 0

    def _open(self) -> socket.socket | None:
        try:
            connection = socket.create_connection(self.options.address, timeout=self.options.probe_timeout)
        except OSError:
            self.open_failures += 1
            return None
        host, port = self.options.address
        start = (
            f"{'GET' if self.options.trickle == 'headers' else 'POST'} {SLOW_PATH} HTTP/1.1\r\nHost: {host}:{port}\r\n"
        )
        if self.options.trickle == "body":
            # A form post with a well-formed CSRF cookie: Django's CSRF check then reads
            # the whole body (looking for the token) before any view runs.
            start += (
                f"Cookie: csrftoken={'s' * 32}\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                "Content-Length: 100000\r\n\r\nusername="
            )
        try:
            connection.sendall(start.encode())
        except OSError:
            connection.close()
            self.open_failures += 1
            return None
        self.opened += 1
        return connection

    def _alive(self, connection: socket.socket) -> bool:
        """Send one more piece; False when the server has closed the connection or answered it."""
        readable, _, _ = select.select([connection], [], [], 0)
        if readable:
            return False  # closed, or an answer (408, 400): either way the server let go
        try:
            connection.sendall(b"X-Slow: 1\r\n" if self.options.trickle == "headers" else b"a")
        except OSError:
            return False
        return True

    def run(self) -> None:
        connections: list[socket.socket | None] = [self._open() for _ in range(self.options.connections)]
        try:
            while not self.stop.wait(self.options.interval):
                for index, connection in enumerate(connections):
                    if connection is not None and self._alive(connection):
                        continue
                    if connection is not None:
                        self.dropped += 1
                        connection.close()
                    connections[index] = self._open()
        finally:
            for connection in connections:
                if connection is not None:
                    connection.close()


def _probe(options: SlowlorisOptions) -> tuple[int, float]:
    """Status (0: no answer within the timeout) and seconds taken."""
    host, port = options.address
    started = time.monotonic()
    connection = http.client.HTTPConnection(host, port, timeout=options.probe_timeout)
    try:
        connection.request("GET", options.probe_path)
        response = connection.getresponse()
        response.read()
        return response.status, time.monotonic() - started
    except OSError:
        return 0, time.monotonic() - started
    finally:
        connection.close()


def _latency(probes: list[tuple[int, float]]) -> dict[str, float | None]:
    answered = sorted(seconds for status, seconds in probes if status)
    return {
        "p50": round(answered[len(answered) // 2] * 1000, 1) if answered else None,
        "max": round(answered[-1] * 1000, 1) if answered else None,
    }


def slowloris_bench(options: SlowlorisOptions) -> dict:
    # The same probes first without the attack: they warm every web process
    # (a cold one loads the model on its first health check) and give the baseline.
    baseline = [_probe(options) for _ in range(options.probes)]
    attack = _Attack(options)
    thread = threading.Thread(target=attack.run, daemon=True)
    thread.start()
    probes = []
    try:
        # The first probe goes out once every slow connection has trickled once.
        for _ in range(options.probes):
            time.sleep(options.interval)
            probes.append(_probe(options))
    finally:
        attack.stop.set()
        thread.join(timeout=options.interval + 30)
    return {
        "url": options.url,
        "connections": options.connections,
        "trickle": options.trickle,
        "interval_s": options.interval,
        "probe_path": options.probe_path,
        "probe_timeout_s": options.probe_timeout,
        "probes": len(probes),
        "answered": sum(1 for status, _ in probes if status),
        "statuses": [status for status, _ in probes],
        "latency_ms": _latency(probes),
        "baseline_answered": sum(1 for status, _ in baseline if status),
        "baseline_latency_ms": _latency(baseline),
        "slow_opened": attack.opened,
        "slow_dropped_by_server": attack.dropped,
        "slow_open_failures": attack.open_failures,
    }


def slowloris_arguments(parser) -> None:
    group = parser.add_argument_group("slowloris (also --url: the server, loopback only)")
    group.add_argument("--connections", type=int, default=8, help="Slow connections kept open (default 8).")
    group.add_argument(
        "--interval", type=float, default=5.0, help="Seconds between a slow connection's sends (default 5)."
    )
    group.add_argument("--trickle", choices=TRICKLES, default="headers", help="Trickle header lines or a body.")
    group.add_argument("--probes", type=int, default=4, help="Health probes, one per interval (default 4).")
    group.add_argument("--probe-timeout", type=float, default=10.0, help="Seconds a probe waits (default 10).")
    group.add_argument("--probe-path", default="/api/v1/health", help="What a probe requests.")


def slowloris_command(command: BaseCommand, *, as_json: bool, **options) -> None:
    import json

    try:
        bench = SlowlorisOptions(
            url=options["url"],
            connections=options["connections"],
            interval=options["interval"],
            trickle=options["trickle"],
            probes=options["probes"],
            probe_timeout=options["probe_timeout"],
            probe_path=options["probe_path"],
        )
    except ApplicationError as exc:
        raise CommandError(exc.message) from None
    report = slowloris_bench(bench)
    if as_json:
        command.stdout.write(json.dumps(report, indent=2))
        return
    latency = report["latency_ms"]
    command.stdout.write(
        f"{report['connections']} connections trickling {report['trickle']} every {report['interval_s']:g} s "
        f"against {report['url']}"
    )
    command.stdout.write(
        f"  probes answered  {report['answered']} of {report['probes']} ({report['probe_path']}, "
        f"timeout {report['probe_timeout_s']:g} s; statuses {report['statuses']})"
    )
    command.stdout.write(f"  latency          p50 {latency['p50']} ms, max {latency['max']} ms")
    baseline = report["baseline_latency_ms"]
    command.stdout.write(
        f"  without them     {report['baseline_answered']} of {report['probes']} answered, "
        f"p50 {baseline['p50']} ms, max {baseline['max']} ms"
    )
    command.stdout.write(
        f"  slow connections opened {report['slow_opened']}, dropped by the server {report['slow_dropped_by_server']}, "
        f"failed to open {report['slow_open_failures']}"
    )
