"""pytest plugin (loaded with ``-p rag_site.testing``): real services for the suite.

Before pytest-django reads settings, start a throw-away embedded PostgreSQL
and Valkey in a temporary directory and point DATABASE_URL / REDIS_URL at
them. Nothing is mocked: the suite talks to real servers, and tests that need
a Celery worker start a real one against the same URLs.

``RAG_TEST_SERVERS=0`` (``make test-fast``, with ``-m unit``) starts neither
server: the URLs point at a port where nothing listens, and a test that needs
the database fails with a message naming the ``unit`` mark.

The ONNX exports (sources/embedding/onnx_export.py) outlive the session: the
session's ``RAG_VAR_DIR/models/onnx`` links to one directory per user
(``RAG_TEST_ONNX_CACHE``, by default ``rag-test-onnx-<uid>`` in the system's
temporary directory), so MiniLM's 87 MB export is built once, not on every
run.
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
# False under RAG_TEST_SERVERS=0.
SERVERS = True

# Syntactically valid, so settings import; port 1 refuses every connection.
UNUSED_DATABASE_URL = "postgres://unused@127.0.0.1:1/unused"
UNUSED_REDIS_URL = "redis://127.0.0.1:1/0"

# What pytest-django uses to give a test the database.
DATABASE_FIXTURES = frozenset({"db", "transactional_db", "django_db_setup", "live_server"})


def onnx_cache_dir() -> Path:
    """Where every session's ONNX exports go (RAG_TEST_ONNX_CACHE, else ``rag-test-onnx-<uid>`` in the temp dir)."""
    # Read with os.environ, like RAG_TEST_SERVERS: a test-only switch, not a setting.
    chosen = os.environ.get("RAG_TEST_ONNX_CACHE", "").strip()
    return Path(chosen) if chosen else Path(tempfile.gettempdir()) / f"rag-test-onnx-{os.getuid()}"


def onnx_cache_share(var_dir: Path, shared: Path) -> bool:
    """Link ``var_dir/models/onnx`` to ``shared``; returns whether it did.

    Safe for sessions running at once: an export's directory is named by the
    weights' and the exporter's checksums and published by a rename, and a
    torn one is exported again (onnx_export.py). A directory that cannot be
    made, or that another user owns (a shared /tmp), is not used: the
    session then exports into its own var dir, as the product does.
    """
    try:
        shared.mkdir(mode=0o700, parents=True, exist_ok=True)
        if shared.stat().st_uid != os.getuid():
            return False
        (var_dir / "models").mkdir(parents=True, exist_ok=True)
        (var_dir / "models" / "onnx").symlink_to(shared.resolve(), target_is_directory=True)
    except OSError:
        return False
    return True


def servers_wanted() -> bool:
    # Read with os.environ, not kernel.env: this is no setting, so it stays out of env.READ.
    value = os.environ.get("RAG_TEST_SERVERS", "1").strip()
    if value not in ("0", "1"):
        raise pytest.UsageError(
            f"RAG_TEST_SERVERS={value!r}: use 1 (start PostgreSQL and Valkey) or 0 (unit tests only)"
        )
    return value == "1"


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config, parser, args):
    # A wrapper runs before pytest-django's own (tryfirst) hook, which imports
    # settings; so the URLs are in the environment by then.
    root = Path(tempfile.mkdtemp(prefix="rag-test-"))
    # Registered first so it runs last, after the servers have stopped.
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    os.environ["RAG_VAR_DIR"] = str(root / "var")
    onnx_cache_share(root / "var", onnx_cache_dir())
    os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-0123456789")
    # Every test client calls from 127.0.0.1, so the 401s and 403s that many
    # tests expect would add up to 429s in the next test; the tests of that
    # limit set it themselves (tests/access/test_auth_failures.py).
    os.environ.setdefault("RAG_AUTH_FAILURES_PER_MINUTE", "0")
    global BROKER, SERVERS
    SERVERS = servers_wanted()
    if not SERVERS:
        # Overwritten, not defaulted: a unit test must never reach a real database from the caller's environment.
        os.environ["DATABASE_URL"] = UNUSED_DATABASE_URL
        os.environ["REDIS_URL"] = UNUSED_REDIS_URL
        return (yield)
    os.environ["DATABASE_URL"] = postgres_start(root / "postgres", cleanup="delete")
    BROKER = Broker(root / "valkey")
    os.environ["REDIS_URL"] = BROKER.start()
    return (yield)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # Without servers, a test asking for the database would only fail with
    # "connection refused" on port 1; say which mark is wrong instead.
    if SERVERS:
        return
    fixtures = set(getattr(item, "fixturenames", ()))  # a test function's; other kinds of items have none
    if item.get_closest_marker("django_db") or DATABASE_FIXTURES & fixtures:
        pytest.fail(
            f"{item.nodeid} needs the database, but RAG_TEST_SERVERS=0 started none: "
            "a `unit` test must not touch PostgreSQL (drop its `unit` mark, or run it with `make test`)",
            pytrace=False,
        )
