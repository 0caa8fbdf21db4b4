"""pytest plugin (loaded with ``-p rag_site.testing``): real services for the suite.

Before pytest-django reads settings, start a throw-away embedded PostgreSQL
and Valkey in a temporary directory and point DATABASE_URL / REDIS_URL at
them. Nothing is mocked: the suite talks to real servers, and tests that need
a Celery worker start a real one against the same URLs.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from rag_site.embedded import Broker, postgres_start

# The suite's Valkey: tests of a broker outage stop it and start it again (tests/conftest.py, broker_outage).
BROKER: Broker | None = None


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # A wrapper runs before pytest-django's own (tryfirst) hook, which imports
    # settings; so the URLs are in the environment by then.
    root = Path(tempfile.mkdtemp(prefix="rag-test-"))
    # Registered first so it runs last, after the servers have stopped.
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    os.environ["RAG_VAR_DIR"] = str(root / "var")
    os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789")
    os.environ["DATABASE_URL"] = postgres_start(root / "postgres", cleanup="delete")
    global BROKER
    BROKER = Broker(root / "valkey")
    os.environ["REDIS_URL"] = BROKER.start()
    return (yield)
