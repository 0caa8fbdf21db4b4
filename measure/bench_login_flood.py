"""`rag_bench login-flood`: what a flood of wrong passwords does to search, on the real web server.

Steps: make a staff account with a random password and an API key without a
rate limit (both removed at the end); start gunicorn as `make run` does (or
use a running server, e.g. one started from an older checkout to measure
"before"); warm it up; then closed-loop searchers for S seconds alone, and
again beside F flooders posting wrong passwords for that account to the two
login pages (half each, CSRF token and cookie as a browser sends them).
Last, the right password once: accepted at once (no throttle) or refused
(locked). Loopback only: every request goes to 127.0.0.1.
"""

import http.client
import multiprocessing
import os
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection

from access.keys import api_key_create
from access.signin import signin_unlock
from kernel.errors import ApplicationError
from measure.bench_load import (
    REQUEST_TIMEOUT,
    Stream,
    clients_run,
    database_url_for,
    percentile_ms,
    samples_summary,
    web_server,
)
from measure.bench_queries import query_stream
from retrieval.search import Mode

WARMUP_SECONDS = 3.0
FLOOD_HEAD_START = 1.0  # seconds the flooders run before the searchers start, so the searchers meet a flood in full
PAGES = ("/accounts/login/", "/admin/login/")
ACCOUNT = "rag-bench-flood"
_CSRF_FIELD = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@dataclass(frozen=True, slots=True)
class LoginFloodOptions:
    seconds: float = 10.0
    flooders: int = 16
    searchers: int = 1
    mode: Mode = Mode.HYBRID
    url: str = ""  # a running server on this database; empty: start one from this checkout
    seed: int = 0

    def __post_init__(self) -> None:
        if self.seconds <= 0:
            raise ApplicationError(f"--seconds must be positive, got {self.seconds}")
        if not 1 <= self.flooders <= 256:
            raise ApplicationError(f"--flooders must be 1 to 256, got {self.flooders}")
        if not 1 <= self.searchers <= 64:
            raise ApplicationError(f"--searchers must be 1 to 64, got {self.searchers}")
        if self.url and urlsplit(self.url).hostname not in ("127.0.0.1", "localhost", "::1"):
            raise ApplicationError(f"--url must be a loopback server (127.0.0.1), got {self.url!r}")


def login_flood_bench(options: LoginFloodOptions, *, log: Callable[[str], None] = print) -> dict:
    password = secrets.token_urlsafe(16)
    user_model = get_user_model()
    user_model.objects.filter(username=ACCOUNT).delete()
    user = user_model.objects.create_user(ACCOUNT, password=password, is_staff=True)  # the real hasher, as people get
    key_row, raw = api_key_create(name="rag_bench login-flood", rate_limit_per_minute=0)
    report: dict = {
        "seconds": options.seconds,
        "flooders": options.flooders,
        "searchers": options.searchers,
        "mode": options.mode.value,
        "server": {"url": options.url or None},
    }
    try:
        if options.url:
            report |= _measure(options.url, raw, password, options, log)
        else:
            database_url = database_url_for(os.environ["DATABASE_URL"], connection.settings_dict["NAME"])
            with web_server(database_url=database_url, log_path=settings.VAR_DIR / "log" / "bench-web.log") as url:
                report["server"] |= {"workers": settings.RAG_WEB_WORKERS, "threads": settings.RAG_WEB_THREADS}
                report |= _measure(url, raw, password, options, log)
    finally:
        key_row.delete()
        user.delete()
        signin_unlock(username=ACCOUNT, address="127.0.0.1")  # the flood's locks would outlive the bench
    return report


def _measure(url: str, key: str, password: str, options: LoginFloodOptions, log: Callable[[str], None]) -> dict:
    log(f"warming up {url} for {WARMUP_SECONDS:.0f} s ...")
    clients_run(
        url=url, key=key, streams=_streams(options, 2 * settings.RAG_WEB_THREADS, offset=10_000), seconds=WARMUP_SECONDS
    )
    samples, elapsed = clients_run(
        url=url, key=key, streams=_streams(options, options.searchers), seconds=options.seconds
    )
    alone = samples_summary(samples, elapsed)
    log(f"  alone: p50 {alone['p50_ms']} ms, p95 {alone['p95_ms']} ms, {alone['qps']} q/s")

    # The flooders run in a process of their own: threads beside the searchers
    # would take the GIL from them and inflate what they measure.
    context = multiprocessing.get_context("fork")  # no thread runs in this process now: a fork is safe
    stop, (receiving, sending) = context.Event(), context.Pipe(duplex=False)
    flooder = context.Process(target=_flood_process, args=(url, options.flooders, stop, sending), daemon=True)
    flooder.start()
    flood_started = time.perf_counter()
    try:
        time.sleep(FLOOD_HEAD_START)
        samples, elapsed = clients_run(
            url=url, key=key, streams=_streams(options, options.searchers), seconds=options.seconds
        )
    finally:
        stop.set()
        attempts: list[tuple[int, float]] = receiving.recv() if receiving.poll(REQUEST_TIMEOUT + 10) else []
        flooder.join(10)
        if flooder.is_alive():
            flooder.kill()
    flood_seconds = time.perf_counter() - flood_started
    beside = samples_summary(samples, elapsed)
    log(
        f"  beside {options.flooders} flooders: p50 {beside['p50_ms']} ms, p95 {beside['p95_ms']} ms, "
        f"{beside['qps']} q/s"
    )
    statuses: dict[str, int] = {}
    for status, _ in attempts:
        statuses[str(status)] = statuses.get(str(status), 0) + 1
    right = _sign_in(url, PAGES[0], password)
    return {
        "alone": alone,
        "beside_flood": beside,
        "flood": {
            "attempts": len(attempts),
            "per_second": round(len(attempts) / flood_seconds, 1),
            "statuses": statuses,
            "p50_ms": percentile_ms([s for _, s in attempts], 50),
            "p95_ms": percentile_ms([s for _, s in attempts], 95),
        },
        "right_password_after_flood": {"status": right, "signed_in": right == 302},
    }


def _streams(options: LoginFloodOptions, count: int, *, offset: int = 0) -> list[Stream]:
    return [
        ((kind, query, options.mode.value) for kind, query in query_stream(seed=options.seed * 1000 + offset + i))
        for i in range(count)
    ]


class _Browser:
    """One keep-alive connection that keeps the CSRF cookie and token, as a browser on the login page would."""

    def __init__(self, url: str, page: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.page = parts.hostname or "127.0.0.1", parts.port or 80, page
        self.connection: http.client.HTTPConnection | None = None
        self.cookie = self.token = ""

    def _request(self, method: str, body: str | None = None) -> tuple[int, bytes, http.client.HTTPResponse]:
        if self.connection is None:
            self.connection = http.client.HTTPConnection(self.host, self.port, timeout=REQUEST_TIMEOUT)
        headers = {"Host": self.host, "Cookie": f"csrftoken={self.cookie}"} if self.cookie else {"Host": self.host}
        if body is not None:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        self.connection.request(method, self.page, body=body, headers=headers)
        response = self.connection.getresponse()
        return response.status, response.read(), response

    def sign_in(self, username: str, password: str) -> int:
        """The answer's status (302: signed in), or 0 when no HTTP answer came."""
        try:
            if not self.token:
                _, page, response = self._request("GET")
                cookie = re.search(r"csrftoken=([^;]+)", response.getheader("Set-Cookie", "") or "")
                field = _CSRF_FIELD.search(page.decode("utf-8", "replace"))
                if cookie is None or field is None:
                    return 0
                self.cookie, self.token = cookie.group(1), field.group(1)
            body = urlencode({"csrfmiddlewaretoken": self.token, "username": username, "password": password})
            return self._request("POST", body)[0]
        except (OSError, http.client.HTTPException):
            self.close()
            return 0

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def _flood_process(url: str, flooders: int, stop, sending) -> None:
    """``flooders`` threads posting wrong passwords, half to each login page, until ``stop``; sends their attempts."""
    attempts: list[tuple[int, float]] = []
    threads = [threading.Thread(target=_flood, args=(url, PAGES[i % 2], stop, attempts)) for i in range(flooders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    sending.send(attempts)


def _flood(url: str, page: str, stop, attempts: list[tuple[int, float]]) -> None:
    browser = _Browser(url, page)
    try:
        while not stop.is_set():
            started = time.perf_counter()
            status = browser.sign_in(ACCOUNT, secrets.token_urlsafe(12))
            attempts.append((status, time.perf_counter() - started))  # list.append is atomic under the GIL
            if status == 0:
                stop.wait(0.1)  # a refused connection must not become a busy loop
    finally:
        browser.close()


def _sign_in(url: str, page: str, password: str) -> int:
    browser = _Browser(url, page)
    try:
        return browser.sign_in(ACCOUNT, password)
    finally:
        browser.close()


def report_lines(report: dict) -> list[str]:
    flood, right = report["flood"], report["right_password_after_flood"]
    lines = [f"search ({report['searchers']} client, {report['mode']}){'':<8} p50 ms    p95 ms     q/s  errors"]
    for label, summary in (
        ("alone", report["alone"]),
        (f"beside {report['flooders']} login flooders", report["beside_flood"]),
    ):
        lines.append(
            f"  {label:<34}{summary['p50_ms']:>8}  {summary['p95_ms']:>8}  {summary['qps']:>6}  {summary['errors']:>6}"
        )
    statuses = ", ".join(f"{status}: {count}" for status, count in sorted(flood["statuses"].items()))
    lines.append(
        f"login flood: {flood['attempts']} attempts, {flood['per_second']}/s, answered p50 {flood['p50_ms']} ms "
        f"p95 {flood['p95_ms']} ms ({statuses})"
    )
    lines.append(
        f"right password after the flood: {right['status']} "
        f"({'signed in at once' if right['signed_in'] else 'refused'})"
    )
    return lines


def login_flood_command(command, *, as_json: bool, **options) -> None:
    """`rag_bench login-flood`: options parsed, the account and key written only where allowed, the report printed."""
    import json

    from django.core.management import call_command
    from django.core.management.base import CommandError

    from measure.bench_search import database_is_embedded

    call_command("migrate", interactive=False, verbosity=0)
    if not options["yes"] and not database_is_embedded():
        raise CommandError(
            f"this database is not this checkout's embedded one (var/postgres): the bench adds account "
            f"{ACCOUNT} and an API key to it for its run. Pass --yes to go ahead."
        )
    try:
        modes = [word for word in options["modes"].replace(" ", ",").split(",") if word]
        bench = LoginFloodOptions(
            seconds=options["seconds"],
            flooders=options["flooders"],
            searchers=options["searchers"],
            mode=Mode.parse(modes[0] if modes else "hybrid"),
            url=options["url"],
            seed=options["seed"],
        )
        log = command.stderr.write if as_json else command.stdout.write
        report = login_flood_bench(bench, log=log)
    except ApplicationError as exc:
        raise CommandError(exc.message) from None
    if as_json:
        command.stdout.write(json.dumps(report, indent=2))
        return
    for line in report_lines(report):
        command.stdout.write(line)
