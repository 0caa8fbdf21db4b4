"""Chunk ids in hits tell nothing of the shared sequence (issue 22, finding 7), yet stay stable and distinct."""

import json
from itertools import pairwise

import pytest

from retrieval.chunk_ids import chunk_public_id
from sources import services
from sources.models import Chunk
from tests.factories import SkillFactory


@pytest.mark.unit
def test_public_ids_are_one_to_one_and_keep_no_order():
    keys = list(range(1, 20_001)) + [2**40 + 7, 2**52 - 1, 2**52, 2**60 + 3]
    ids = [chunk_public_id(pk, secret="one key") for pk in keys]
    assert len(set(ids)) == len(keys)
    # exact in a JSON double
    assert all(0 <= public < 2**53 for pk, public in zip(keys, ids, strict=True) if pk < 2**52)
    # Consecutive chunks get unrelated ids: no differences to count other tenants' chunks by.
    rises = sum(b > a for a, b in pairwise(ids[:20_000]))
    assert 9_000 < rises < 11_000 and len({b - a for a, b in pairwise(ids[:100])}) == 99


@pytest.mark.unit
def test_public_ids_depend_on_the_secret_key():
    first = [chunk_public_id(pk, secret="one key") for pk in range(1, 100)]
    assert [chunk_public_id(pk, secret="one key") for pk in range(1, 100)] == first  # stable
    other = (chunk_public_id(pk, secret="another key") for pk in range(1, 100))
    assert sum(a == b for a, b in zip(first, other, strict=True)) <= 1


@pytest.mark.django_db
def test_search_hits_carry_public_ids_not_the_tables_keys(key_client, settings):
    for slug in ("deploy", "backups"):
        services.skill_index(
            skill_id=SkillFactory(slug=slug, body=f"# {slug}\n\nNightly backups of the {slug} data.\n").pk
        )
    pks = set(Chunk.objects.values_list("pk", flat=True))

    def chunk_ids() -> list[int]:
        answer = key_client.post(
            "/api/v1/search", data=json.dumps({"query": "nightly backups", "k": 10}), content_type="application/json"
        )
        assert answer.status_code == 200
        return [hit["chunk_id"] for hit in answer.json()["hits"]]

    found = chunk_ids()
    assert found and len(set(found)) == len(found)
    assert set(found).isdisjoint(pks)
    assert set(found) <= {chunk_public_id(pk, secret=settings.SECRET_KEY) for pk in pks}
    assert chunk_ids() == found  # the same chunk, the same id
