"""gunicorn's access log carries no credential (issue 39, item 9): rag_site/gunicorn_logging.py."""

import base64
import http.client
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rag_site.gunicorn_logging import REDACTED, atoms_redact, url_redact
from rag_site.management.commands.rag_run import web_command
from rag_site.supervisor import process_stop

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.unit
def test_every_atom_that_can_carry_a_credential_is_cleaned():
    atoms = {
        "u": "ghp_user_name_token",
        "r": "GET /search?q=deploy&token=s3cret&api_key=k3y HTTP/1.1",
        "q": "q=deploy&token=s3cret&access_token=t0k",
        "f": "https://alice:pa55@example.com/page?code=0auth&page=2",
        "U": "/search",
        "{authorization}i": "Basic YWxpY2U6cGE1NQ==",
        "{cookie}i": "sessionid=abc",
        "{x-api-key}i": "rag_abc_def",
        "{referer}i": "https://example.com/?password=pw",
        "{user-agent}i": "curl/8",
        "{set-cookie}o": "sessionid=abc; HttpOnly",
        "{http_authorization}e": "Bearer rag_abc_def",
        "{query_string}e": "token=s3cret",
        "{raw_uri}e": "/x?secret=s",
    }
    cleaned = atoms_redact(atoms)
    assert cleaned["u"] == "-"
    assert cleaned["r"] == f"GET /search?q=deploy&token={REDACTED}&api_key={REDACTED} HTTP/1.1"
    assert cleaned["q"] == f"q=deploy&token={REDACTED}&access_token={REDACTED}"
    assert cleaned["f"] == f"https://{REDACTED}@example.com/page?code={REDACTED}&page=2"
    assert cleaned["U"] == "/search" and cleaned["{user-agent}i"] == "curl/8"
    for atom in ("{authorization}i", "{cookie}i", "{x-api-key}i", "{set-cookie}o", "{http_authorization}e"):
        assert cleaned[atom] == REDACTED, atom
    assert cleaned["{referer}i"] == f"https://example.com/?password={REDACTED}"
    assert cleaned["{query_string}e"] == f"token={REDACTED}" and cleaned["{raw_uri}e"] == f"/x?secret={REDACTED}"


@pytest.mark.unit
def test_an_absolute_request_target_loses_its_user_info():
    assert url_redact("http://bot:tok@host:8000/metrics") == f"http://{REDACTED}@host:8000/metrics"
    assert url_redact("/plain/path") == "/plain/path"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_web_servers_access_log_holds_no_credential(tmp_path):
    """The real gunicorn, started with `make run`'s command line and an access log, sent credentials every way."""
    port, log = free_port(), tmp_path / "access.log"
    command = web_command(python=sys.executable, bind=f"127.0.0.1:{port}", answers=False)
    command += ["--workers=1", f"--access-logfile={log}"]
    env = {**os.environ, "RAG_METRICS_TOKEN": "", "RAG_METRICS_TOKEN_FILE": ""}
    server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    basic = base64.b64encode(b"ghp_BasicUserToken1:BasicPassword2").decode()
    requests = [
        ("/metrics?token=QueryToken3&q=ok", {"Authorization": f"Basic {basic}"}),
        ("/metrics", {"Authorization": "Bearer BearerToken4", "Referer": "https://u:RefererPass5@x/?api_key=Key6"}),
        (f"http://bot:UserInfoToken7@127.0.0.1:{port}/metrics", {}),
    ]
    try:
        deadline = time.monotonic() + 60
        for target, headers in requests:
            while True:
                try:
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                    connection.request("GET", target, headers=headers)
                    connection.getresponse().read()
                    connection.close()
                    break
                except ConnectionRefusedError:
                    assert server.poll() is None and time.monotonic() < deadline, "gunicorn did not start"
                    time.sleep(0.2)
    finally:
        process_stop(server)
    text = log.read_text()
    assert text.count("/metrics") == 3, text  # every request was logged
    for secret in ("BasicUserToken1", "BasicPassword2", "QueryToken3", "BearerToken4", "RefererPass5", "Key6"):
        assert secret not in text, f"{secret} in the access log:\n{text}"
    assert "UserInfoToken7" not in text, text
