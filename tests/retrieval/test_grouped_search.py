"""Results grouped by file (issue 41): one hit per file with its next best chunks as snippets, k counting files."""

import json

import pytest

from sources.models import WorkspaceRoot
from tests.conftest import index_root

pytestmark = pytest.mark.django_db

QUERY = "get_queryset"


def functions(prefix: str, count: int) -> str:
    return "".join(
        f'def {prefix}_{n}(request):\n    """Variant {n}."""\n    queryset = request.model.objects.filter(n={n})\n'
        f"    return queryset.get_queryset()\n\n\n"
        for n in range(count)
    )


@pytest.fixture
def tree(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    settings.RAG_RATE_LIMIT_PER_MINUTE = 0
    root = tmp_path / "admin"
    root.mkdir()
    (root / "fields.py").write_text(functions("get_queryset", 6))  # six chunks that all match
    (root / "options.py").write_text(functions("options_get_queryset", 1))
    (root / "main.py").write_text(functions("changelist_get_queryset", 1))
    index_root(WorkspaceRoot.objects.create(name="admin", path=str(root)))
    return root


def search(key_client, **payload) -> dict:
    response = key_client.post(
        "/api/v1/search", data=json.dumps({"query": QUERY, **payload}), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_grouped_by_file_each_file_comes_once_with_its_next_chunks_as_snippets(tree, key_client):
    flat = [hit["path"] for hit in search(key_client, k=5)["hits"]]
    assert flat.count("fields.py") >= 2  # ungrouped, one file's chunks fill the list

    hits = search(key_client, k=5, group="file")["hits"]
    paths = [hit["path"] for hit in hits]
    assert sorted(paths) == ["fields.py", "main.py", "options.py"]  # each file once
    fields = hits[paths.index("fields.py")]
    assert len(fields["snippets"]) == 2  # its best chunk and the next two
    ids = {fields["chunk_id"], *(s["chunk_id"] for s in fields["snippets"])}
    assert len(ids) == 3
    for more in fields["snippets"]:
        assert more["citation"] == f"fields.py:{more['start_line']}-{more['end_line']}"
        assert "get_queryset" in more["content"] and more["score"] <= fields["score"]
    assert all(hit["snippets"] == [] for hit in hits if hit["path"] != "fields.py")
    # true keeps its meaning: the best chunk per file, nothing more.
    assert all(hit["snippets"] == [] for hit in search(key_client, k=5, group=True)["hits"])


def test_k_counts_files_even_when_one_file_holds_every_first_candidate(tree, key_client, settings):
    settings.RAG_SEARCH_CANDIDATES = 4  # the first fetch: fields.py's chunks could be all of them
    hits = search(key_client, k=3, group="file")["hits"]
    assert sorted(hit["path"] for hit in hits) == ["fields.py", "main.py", "options.py"]


@pytest.mark.parametrize("group", ["files", "chunk", 1, None])
def test_an_unknown_grouping_is_a_422(tree, key_client, group):
    response = key_client.post(
        "/api/v1/search", data=json.dumps({"query": QUERY, "group": group}), content_type="application/json"
    )
    assert response.status_code == 422 and "group" in response.content.decode()
