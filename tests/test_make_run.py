"""`make run`'s command, as a new user meets it: it serves, the printed admin
login works, a second copy is refused, and Ctrl-C leaves nothing running."""

import http.cookiejar
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.worker


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def get(url: str, opener=None) -> tuple[int, str]:
    try:
        with (opener or urllib.request.build_opener()).open(url, timeout=10) as response:
            return response.status, response.read().decode()
    except OSError:
        return 0, ""


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


def test_make_run_serves_logs_in_and_stops_everything(tmp_path):
    var_dir = tmp_path / "var"
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY")}
    environment.update(RAG_VAR_DIR=str(var_dir), RAG_BIND=f"127.0.0.1:{port}", RAG_WEB_WORKERS="1")
    output = tmp_path / "run.out"
    with open(output, "wb") as out:
        run = subprocess.Popen([sys.executable, "manage.py", "rag_run"], cwd=ROOT, env=environment, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(base + "/")[0] == 200 or run.poll() is not None, timeout=180, what="the web server")
        text = output.read_text()
        assert run.poll() is None, text
        password = re.search(r"^\s+password\s+(\S+)$", text, flags=re.MULTILINE).group(1)
        assert "username  admin" in text

        second = subprocess.run([sys.executable, "manage.py", "rag_run"], cwd=ROOT, env=environment,
                                capture_output=True, text=True, timeout=60)
        assert second.returncode == 1
        assert "already running" in second.stderr

        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        get(base + "/admin/login/", opener)
        token = next(c.value for c in jar if c.name == "csrftoken")
        form = urllib.parse.urlencode({"username": "admin", "password": password, "csrfmiddlewaretoken": token,
                                       "next": "/admin/"}).encode()
        request = urllib.request.Request(base + "/admin/login/?next=/admin/", data=form, headers={"Referer": base + "/admin/login/"})
        with opener.open(request, timeout=10) as response:
            assert "Log out" in response.read().decode()

        created = subprocess.run([sys.executable, "manage.py", "rag_apikey", "create", "smoke-test"], cwd=ROOT, env=environment,
                                 capture_output=True, text=True, timeout=120)
        assert created.returncode == 0, created.stderr
        key = created.stdout.strip()

        def demo_found():
            request = urllib.request.Request(base + "/api/v1/search", data=json.dumps({"query": "first login password"}).encode(),
                                             headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
            with urllib.request.urlopen(request, timeout=30) as response:
                return any(h["source_key"] == "skill:getting-started" for h in json.load(response)["hits"])

        wait_for(demo_found, timeout=180, interval=1, what="the demo skills to be indexed by the worker")
        assert len(ours(var_dir)) >= 4  # postgres, valkey, web, worker, beat, ...
    finally:
        run.send_signal(signal.SIGINT)
        run.wait(timeout=90)
    assert "stopped web, worker and beat" in output.read_text()
    wait_for(lambda: not ours(var_dir), timeout=30, what="every child process to exit")
