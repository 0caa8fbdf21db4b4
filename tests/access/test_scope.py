"""The scope rule's two forms, ORM filter and SQL, select the same sources and chunks."""

import itertools
from dataclasses import replace
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from access.scope import Scope
from sources.models import Chunk, Source

pytestmark = pytest.mark.django_db

SCOPES = [
    Scope(),
    Scope(bot_ids=("alpha",)),
    Scope(bot_ids=("alpha", "beta"), client_ids=("x",)),
    Scope(channels=("ops",)),
    Scope(channels=("ops", "night"), bot_ids=None),
    Scope(bot_ids=None, client_ids=None, channels=None),
    Scope(bot_ids=None, client_ids=None, channels=None, kinds=(Source.Kind.DATASET,)),
    Scope(kinds=(Source.Kind.SKILL, Source.Kind.FILE)),
    Scope(bot_ids=None, client_ids=None, channels=None, source_ids=(-1,)),  # -1: the first few sources made
]


def concrete(scope: Scope) -> Scope:
    if scope.source_ids != (-1,):
        return scope
    return replace(scope, source_ids=tuple(Source.objects.order_by("pk").values_list("pk", flat=True)[:5]))


@pytest.fixture
def sources():
    values = itertools.product(
        ["", "alpha", "beta"],
        ["", "x"],
        [[], ["ops"], ["night", "day"]],
        [Source.Kind.SKILL, Source.Kind.FILE, Source.Kind.DATASET],
        [True, False],
    )
    # Some sources expire (a memory's expiry), some of them already have; a period of 7 falls across the others'.
    now = timezone.now()
    past, future = now - timedelta(minutes=1), now + timedelta(hours=1)
    expiries = [None, past, None, future, None, None, past]
    for number, (bot, client, channels, kind, enabled) in enumerate(values):
        source = Source.objects.create(
            key=f"{kind}:{number}",
            kind=kind,
            bot_id=bot,
            client_id=client,
            channels=channels,
            enabled=enabled,
            expires_at=expiries[number % 7],
            active_generation=number % 2,
        )
        Chunk.objects.bulk_create(
            Chunk(
                source=source,
                generation=generation,
                chunk_index=0,
                content="text",
                start_line=1,
                end_line=1,
                content_hash="x",
                chunking_version="1",
            )
            for generation in (0, 1)
        )


def sql_ids(sql: str, params: dict) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


@pytest.mark.parametrize("scope", SCOPES)
@pytest.mark.parametrize("enabled_only", [True, False])
def test_the_orm_filter_and_the_sql_see_the_same_sources(sources, scope, enabled_only):
    scope = concrete(scope)
    where, params = scope.source_sql(enabled_only=enabled_only)
    expected = sql_ids(f"SELECT s.id FROM {Source._meta.db_table} s WHERE {where}", params)
    assert expected  # every scope above sees something: the comparison is not between two empty sets
    assert (
        set(Source.objects.filter(scope.source_filter(enabled_only=enabled_only)).values_list("pk", flat=True))
        == expected
    )
    assert (
        set(Source.objects.filter(pk__in=scope.source_ids_sql(enabled_only=enabled_only)).values_list("pk", flat=True))
        == expected
    )


@pytest.mark.parametrize("scope", SCOPES)
def test_the_orm_filter_and_the_sql_see_the_same_chunks(sources, scope):
    scope = concrete(scope)
    where, params = scope.chunk_sql()
    expected = sql_ids(
        f"SELECT c.id FROM {Chunk._meta.db_table} c JOIN {Source._meta.db_table} s ON s.id = c.source_id WHERE {where}",
        params,
    )
    assert expected
    assert set(Chunk.objects.filter(scope.chunk_filter()).values_list("pk", flat=True)) == expected


def test_an_expired_source_is_not_served_but_is_still_managed(sources):
    everyone = Scope(bot_ids=None, client_ids=None, channels=None)
    expired_sources = Source.objects.filter(expires_at__lte=timezone.now()).exclude(kind=Source.Kind.DATASET)
    expired = set(expired_sources.values_list("pk", flat=True))
    served = set(Source.objects.filter(everyone.source_filter()).values_list("pk", flat=True))
    managed = set(Source.objects.filter(everyone.source_filter(enabled_only=False)).values_list("pk", flat=True))

    assert expired and not expired & served
    assert expired <= managed
