"""`make run`'s command, as a new user meets it: it serves, the printed admin
login works, a second copy is refused, slow clients wait in the front while
the health check answers, a killed worker comes back, and Ctrl-C leaves
nothing running."""

import http.client
import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent
pytestmark = [pytest.mark.worker, pytest.mark.slow]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str, opener=None, timeout: float = 10) -> tuple[int, str]:
    """Status and body; an error status counts as answered, (0, "") means no answer."""
    try:
        with (opener or urllib.request.build_opener()).open(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def raw_get(port: int, target: str) -> tuple[int, str, str]:
    """GET ``target`` as sent, without a client library's own limits: status, Content-Type, body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request("GET", target)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", "").split(";")[0], response.read().decode()
    finally:
        connection.close()


def server_side_ports(run_pid: int) -> set[int]:
    """Client ports of the connections that `make run`'s processes hold open."""
    ports = set()
    for process in psutil.Process(run_pid).children(recursive=True):
        try:
            ports |= {c.raddr.port for c in process.net_connections() if c.raddr}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return ports


def ours(var_dir: Path) -> list[psutil.Process]:
    """Every process started for this var/ (servers, web, worker, beat)."""
    found = []
    for process in psutil.process_iter(["cmdline", "environ"]):
        try:
            cmdline = " ".join(process.info["cmdline"] or [])
            environ = process.info["environ"] or {}
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if str(var_dir) in cmdline or environ.get("RAG_VAR_DIR") == str(var_dir):
            found.append(process)
    return found


def supervised(run_pid: int, program: str) -> psutil.Process | None:
    """The child of `make run` running ``program``: "worker" (bulk), "interactive" or "beat" (Celery), or "gunicorn".

    The two Celery workers differ by their node name (rag_run.worker_command).
    """
    for child in psutil.Process(run_pid).children():
        try:
            argv = child.cmdline()
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            continue
        if (argv[1:3] == ["-m", "gunicorn"] and program == "gunicorn") or (
            argv[1:3] == ["-m", "celery"]
            and (argv[5] == program if program == "beat" else f"--hostname={program}@%h" in argv)
        ):
            return child
    return None


def healthcheck(*argv: str, env: dict[str, str]) -> bool:
    """Run a docker-compose health check command here; True when it passes."""
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, timeout=60).returncode == 0


def test_make_run_serves_logs_in_and_stops_everything(tmp_path):
    var_dir = tmp_path / "var"
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
    environment.update(
        RAG_VAR_DIR=str(var_dir), RAG_BIND=f"127.0.0.1:{port}", RAG_WEB_WORKERS="1", RAG_METRICS_TOKEN="run-metrics"
    )
    output = tmp_path / "run.out"
    with open(output, "wb") as out:
        run = subprocess.Popen(
            [sys.executable, "manage.py", "rag_run"], cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT
        )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(base + "/")[0] == 200 or run.poll() is not None, timeout=180, what="the web server")
        text = output.read_text()
        assert run.poll() is None, text
        password = re.search(r"^\s+password\s+(\S+)$", text, flags=re.MULTILINE).group(1)
        assert "username  admin" in text

        second = subprocess.run(
            [sys.executable, "manage.py", "rag_run"],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert second.returncode == 1
        assert "already running" in second.stderr

        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        get(base + "/admin/login/", opener)
        token = next(c.value for c in jar if c.name == "csrftoken")
        form = urllib.parse.urlencode(
            {"username": "admin", "password": password, "csrfmiddlewaretoken": token, "next": "/admin/"}
        ).encode()
        request = urllib.request.Request(
            base + "/admin/login/?next=/admin/", data=form, headers={"Referer": base + "/admin/login/"}
        )
        with opener.open(request, timeout=10) as response:
            assert "Log out" in response.read().decode()

        created = subprocess.run(
            [sys.executable, "manage.py", "rag_apikey", "create", "smoke-test"],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert created.returncode == 0, created.stderr
        key = created.stdout.strip()

        def demo_found():
            request = urllib.request.Request(
                base + "/api/v1/search",
                data=json.dumps({"query": "first login password"}).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                return any(h["source_key"] == "skill:getting-started" for h in json.load(response)["hits"])

        wait_for(demo_found, timeout=180, interval=1, what="the demo skills to be indexed by the worker")

        # /metrics, answered by web, sums what every process counted (kernel/metrics.py): the chunks the
        # workers embedded, the searches web answered.
        scrape = urllib.request.Request(base + "/metrics", headers={"Authorization": "Bearer run-metrics"})
        with urllib.request.urlopen(scrape, timeout=30) as response:
            samples = {
                sample.name: sample.value
                for family in text_string_to_metric_families(response.read().decode())
                for sample in family.samples
                if sample.labels.get("route") in (None, "api/v1/search")
            }
        assert samples["rag_chunks_embedded_total"] > 0
        assert samples["rag_http_requests_total"] >= 1
        assert len(list((var_dir / "metrics").glob("counter_*.db"))) >= 2  # web's and a worker's, at least
        assert len(ours(var_dir)) >= 4  # postgres, valkey, web, worker, beat, ...

        # docker-compose's health checks for web and beat pass against the real processes.
        assert healthcheck(
            sys.executable, "-m", "rag_site.healthcheck", "web", base + "/accounts/login/", env=environment
        )
        wait_for(
            lambda: healthcheck(sys.executable, "-m", "rag_site.healthcheck", "beat", env=environment),
            timeout=60,
            interval=1,
            what="beat's heartbeat",
        )

        # Slow clients (issue 22, finding 6): eight connections that never finish their headers, twice
        # web's threads (one process x 4), are held by the front, and the health check still answers.
        slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
        for connection in slow:
            connection.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        slow_ports = {connection.getsockname()[1] for connection in slow}
        wait_for(
            lambda: slow_ports <= server_side_ports(run.pid), timeout=30, what="the slow connections to be accepted"
        )
        assert get(base + "/api/v1/health", timeout=60)[0] in (200, 503)
        assert get(base + "/accounts/login/")[0] == 200
        # Web is reachable only through the front, so it believes the front's X-Forwarded-For.
        assert (var_dir / "run").stat().st_mode & 0o777 == 0o700
        assert supervised(run.pid, "gunicorn").environ()["RAG_TRUST_PROXY_HEADERS"] == "true"

        # An over-long request line under /api/ gets a JSON error, not the web server's HTML page.
        status, content_type, body = raw_get(port, "/api/v1/search?q=" + "a" * 5000)
        assert status == 414 and content_type == "application/json", (status, content_type, body)
        assert json.loads(body)["error"]

        # Both queues have their worker (sources/queues.py).
        assert "--queues=bulk" in supervised(run.pid, "worker").cmdline()
        # A killed worker (the one saves go to) is restarted, its pool process does not linger, web keeps serving.
        worker = supervised(run.pid, "interactive")
        assert "--queues=interactive" in worker.cmdline()
        pool = worker.children()
        assert pool  # prefork: the process that runs the tasks
        worker.send_signal(signal.SIGKILL)
        wait_for(
            lambda: re.search(
                r"^interactive exited with code -9; restarting in 1 s \(restart 1\)", output.read_text(), re.MULTILINE
            ),
            timeout=30,
            what="the supervisor to report the worker's exit",
        )
        new_worker = wait_for(
            lambda: (found := supervised(run.pid, "interactive")) and found.pid != worker.pid and found,
            timeout=30,
            what="a new worker process",
        )
        wait_for(
            lambda: not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in pool),
            timeout=30,
            what="the killed worker's pool process to end",
        )
        assert get(base + "/accounts/login/")[0] == 200
        assert run.poll() is None

        # The new worker answers docker-compose's ping (through the broker) and indexes a new skill.
        broker = json.loads((var_dir / "valkey" / "server.json").read_text())["url"]
        ping = f"celery -A rag_site inspect ping --destination interactive@{socket.gethostname()} --timeout 10"
        celery_env = {**environment, "REDIS_URL": broker, "DATABASE_URL": "postgres://unused@localhost/unused"}
        wait_for(
            lambda: healthcheck(sys.executable, "-m", *ping.split(), env=celery_env),
            timeout=120,
            interval=1,
            what="the new worker to answer a ping",
        )
        created = subprocess.run(
            [
                sys.executable,
                "manage.py",
                "shell",
                "-c",
                "from sources.models import Skill; Skill.objects.create(slug='zebra-crossings', "
                "body='# Zebra crossings\\n\\nStriped pedestrian crossings where drivers give way to walkers.')",
            ],
            cwd=ROOT,
            env=environment,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert created.returncode == 0, created.stderr

        def new_skill_found():
            request = urllib.request.Request(
                base + "/api/v1/search",
                data=json.dumps({"query": "zebra crossing pedestrians"}).encode(),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
            )
            with urllib.request.urlopen(request, timeout=30) as response:
                return any(h["source_key"] == "skill:zebra-crossings" for h in json.load(response)["hits"])

        wait_for(new_skill_found, timeout=180, interval=1, what="the restarted worker to index a new skill")
        assert new_worker.is_running()
        for connection in slow:
            connection.close()
    finally:
        run.send_signal(signal.SIGINT)
        run.wait(timeout=90)
    assert "stopped front, web, workers and beat" in output.read_text()
    wait_for(lambda: not ours(var_dir), timeout=30, what="every child process to exit")
