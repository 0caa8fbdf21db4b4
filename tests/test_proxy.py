"""Behind the proxy, the client address comes from the proxy's X-Forwarded-For
entry, and only when RAG_TRUST_PROXY_HEADERS says the proxy sets it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.http import HttpResponse
from django.test import RequestFactory, override_settings

from surfaces.proxy import ForwardedClientMiddleware

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent


def client_address(**headers) -> str:
    request = RequestFactory().get("/", REMOTE_ADDR="10.0.0.2", headers=headers)
    return ForwardedClientMiddleware(lambda r: HttpResponse(r.META["REMOTE_ADDR"]))(request).content.decode()


@override_settings(RAG_TRUST_PROXY_HEADERS=True)
def test_the_proxys_entry_replaces_the_proxys_address():
    # The client wrote "1.1.1.1" itself; the proxy appended the address it saw.
    assert client_address(x_forwarded_for="1.1.1.1, 203.0.113.7") == "203.0.113.7"
    assert client_address() == "10.0.0.2"


@override_settings(RAG_TRUST_PROXY_HEADERS=False)
def test_without_a_trusted_proxy_the_header_is_ignored():
    assert client_address(x_forwarded_for="203.0.113.7") == "10.0.0.2"


def test_trusting_the_proxy_trusts_its_https_header():
    code = "from django.conf import settings; print(settings.SECURE_PROXY_SSL_HEADER)"
    for value, expected in (("true", "('HTTP_X_FORWARDED_PROTO', 'https')"), ("false", "None")):
        result = subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "RAG_TRUST_PROXY_HEADERS": value},
            capture_output=True,
            text=True,
            cwd=ROOT,
        )
        assert result.stdout.strip() == expected, result.stderr


@override_settings(
    RAG_TRUST_PROXY_HEADERS=True,
    SECURE_PROXY_SSL_HEADER=("HTTP_X_FORWARDED_PROTO", "https"),
    SECURE_SSL_REDIRECT=True,
    ALLOWED_HOSTS=["testserver"],
)
def test_a_request_the_proxy_marks_https_is_not_redirected(client):
    assert client.get("/accounts/login/", headers={"x-forwarded-proto": "https"}).status_code == 200
    assert client.get("/accounts/login/").status_code == 301
