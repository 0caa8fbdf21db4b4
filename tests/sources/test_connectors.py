"""The connector interface (sources/connectors/base.py): a connector of a few lines gets the whole pipeline.

``Pages`` is a connector over a dict in memory, registered before the
folder for roots named "pages-*": what a new connector's test looks like.
"""

from collections.abc import Iterator, Mapping, Sequence

import pytest

from sources.connectors import registry
from sources.connectors.base import KEPT, Connector, Item, Skipped
from sources.models import Chunk, IndexedFile, JobStatus, WorkspaceRoot
from tests.conftest import index_root

pytestmark = pytest.mark.django_db

SITE: dict[str, tuple[str, bytes]] = {}  # url -> (ETag, body)
READS: list[str] = []


class Pages(Connector):
    kind = "pages"

    @classmethod
    def claims(cls, root: WorkspaceRoot) -> bool:
        return root.name.startswith("pages-")

    def items(self, *, paths: Sequence[str], known: Mapping[str, str]) -> Iterator[Item | Skipped]:
        for url, (etag, _) in SITE.items():
            if etag == "private":
                yield Skipped(url, "disallowed by robots.txt")
            else:
                yield Item(url, marker=etag, metadata={"site": "example"})

    def reader_name(self, path: str, marker: str) -> str:
        return "page.html"

    def read(self, item: Item) -> bytes | Skipped:
        READS.append(item.path)
        if item.path not in SITE:
            return Skipped(item.path, KEPT)  # listed from what was stored, not fetched this time
        return SITE[item.path][1]


@pytest.fixture
def pages(monkeypatch, tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    monkeypatch.setattr(registry, "CONNECTORS", (Pages, *registry.CONNECTORS))
    SITE.clear()
    READS.clear()
    return WorkspaceRoot.objects.create(name="pages-site", path="https://example.invalid/", cooldown_seconds=0)


def html(title: str, text: str) -> bytes:
    return f"<!doctype html><html><body><h1>{title}</h1><p>{text}</p></body></html>".encode()


def test_a_connector_lists_and_reads_and_the_pipeline_does_the_rest(pages):
    SITE.update(
        {
            "https://example.invalid/a": ("e1", html("Herons", "Grey herons wade in shallow water.")),
            "https://example.invalid/b": ("e1", html("Egrets", "Little egrets have yellow feet.")),
            "https://example.invalid/private": ("private", b""),
        }
    )
    first = index_root(pages, force=False)
    assert first.status == JobStatus.SUCCEEDED, first.message
    assert (first.files_changed, first.files_skipped) == (2, 1)
    assert {error["reason"] for error in first.errors} == {"disallowed by robots.txt"}
    heron = Chunk.objects.get(path="https://example.invalid/a")
    assert heron.content.startswith("# Herons") and heron.metadata["site"] == "example"  # extracted as HTML
    assert IndexedFile.objects.get(path="https://example.invalid/a").marker == "e1"

    # Same markers: nothing read. A new marker: read again. Gone from the listing: deleted.
    READS.clear()
    SITE["https://example.invalid/b"] = ("e2", html("Egrets", "Great egrets are larger."))
    del SITE["https://example.invalid/a"]
    second = index_root(pages, force=False)
    assert (second.files_unchanged, second.files_changed, second.files_deleted) == (0, 1, 1)
    assert READS == ["https://example.invalid/b"]
    assert set(Chunk.objects.values_list("path", flat=True)) == {"https://example.invalid/b"}

    READS.clear()
    third = index_root(pages, force=False)
    assert (third.files_unchanged, third.files_changed, READS) == (1, 0, [])


def test_a_page_holding_a_secret_is_skipped_with_the_reason(pages):
    key = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn\n-----END OPENSSH PRIVATE KEY-----"
    SITE["https://example.invalid/deploy"] = ("e1", html("Deploy", f"<pre>{key}</pre>"))
    job = index_root(pages, force=False)
    reason = "contains a secret (private key header)"
    assert job.errors == [{"path": "https://example.invalid/deploy", "reason": reason}]
    assert not Chunk.objects.exists()
