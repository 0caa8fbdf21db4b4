"""Which database errors count as a lost connection, and the 503 for one outside any view (issue 22, finding 8).

No database: the errors are built as psycopg and Django raise them.
"""

import psycopg
import pytest
from django.db import InterfaceError, OperationalError

from kernel.errors import connection_lost
from surfaces.handlers import server_error

pytestmark = pytest.mark.unit


def wrapped(cause: Exception, kind: type[Exception] = OperationalError) -> Exception:
    exc = kind(str(cause))
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("exc", "lost"),
    [
        (wrapped(psycopg.errors.AdminShutdown("terminating connection due to administrator command")), True),
        (wrapped(psycopg.errors.CannotConnectNow("the database system is starting up")), True),
        (wrapped(psycopg.OperationalError("server closed the connection unexpectedly")), True),
        (wrapped(psycopg.errors.ConnectionFailure("connection failure")), True),
        (wrapped(psycopg.InterfaceError("connection already closed"), InterfaceError), True),
        (wrapped(psycopg.errors.QueryCanceled("canceling statement due to statement timeout")), False),
        (wrapped(psycopg.errors.LockNotAvailable("could not obtain lock")), False),
        (ValueError("not a database error"), False),
    ],
)
def test_only_a_dropped_or_refused_connection_counts_as_lost(exc, lost):
    assert connection_lost(exc) is lost


@pytest.mark.parametrize(("path", "content_type"), [("/api/v1/skills", "application/json"), ("/admin/", "text/plain")])
def test_a_lost_connection_outside_any_view_answers_503_not_500(rf, path, content_type):
    # A middleware's query has no view to run again: Django's 500 handler answers the outage.
    try:
        raise wrapped(psycopg.errors.AdminShutdown("terminating connection due to administrator command"))
    except OperationalError:
        response = server_error(rf.get(path))
    assert response.status_code == 503 and response["Retry-After"]
    assert response["Content-Type"].startswith(content_type)
