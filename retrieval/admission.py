"""Admission for long queries: a few at a time across every web process, so they cannot crowd out the rest.

A query of more than RAG_SEARCH_LONG_QUERY_WORDS words (a pasted paragraph,
a bot's whole prompt) costs a few times a question: a longer embedding, a
postings list per word, more candidates to score. Four clients sending
nothing else kept both cores of the development machine busy and tripled
everyone else's p95 (`rag_bench search --contention`). At most
RAG_SEARCH_LONG_QUERY_CONCURRENCY of them run at once in the whole
deployment; the others wait for a turn (a PostgreSQL advisory lock: every
web process shares it, and a crashed one releases it with its connection),
up to RAG_SEARCH_LONG_QUERY_WAIT_MS, then get a 503 saying so.
"""

import random
from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import OperationalError, connection, transaction
from psycopg.errors import LockNotAvailable

from kernel.errors import Unavailable

# The advisory locks' first key: "rag" + "long" in ASCII, out of the way of other users of advisory locks.
LOCK_NAMESPACE = 0x7261676C


def is_long(query: str) -> bool:
    return len(query.split()) > settings.RAG_SEARCH_LONG_QUERY_WORDS


@contextmanager
def search_admitted(query: str) -> Iterator[None]:
    """Run the block now for a short query; for a long one, once one of the slots is free."""
    if not is_long(query):
        yield
        return
    slots = settings.RAG_SEARCH_LONG_QUERY_CONCURRENCY
    with transaction.atomic():
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT set_config('lock_timeout', %s, true)", [f"{settings.RAG_SEARCH_LONG_QUERY_WAIT_MS}ms"]
                )
                # A random slot: waiters spread over the slots instead of all queueing on the first.
                cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_NAMESPACE, random.randrange(slots)])
                cursor.execute("SELECT set_config('lock_timeout', '0', true)")
        except OperationalError as exc:
            if isinstance(exc.__cause__, LockNotAvailable):
                raise Unavailable(
                    f"too many long queries are running; a query of more than {settings.RAG_SEARCH_LONG_QUERY_WORDS} "
                    f"words waited {settings.RAG_SEARCH_LONG_QUERY_WAIT_MS} ms for its turn; try again, or shorten it",
                ) from None
            raise
        yield
