"""The stored text of each indexed file (sources.models.FileText): written, moved and deleted with its IndexedFile.

Grep answers from it (retrieval/grep.py) and a web page's read serves it
(retrieval/files.py): the lines there are the lines the chunks cite.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from django.db.models import Q

from sources.extract import Anchor
from sources.models import FileText, Source


class TextOfFile(Protocol):
    """What a text is stored from (sources.ingest.Document and TextOnly have these)."""

    @property
    def source(self) -> Source: ...
    @property
    def generation(self) -> int: ...
    @property
    def path(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def anchors(self) -> tuple[Anchor, ...]: ...


@dataclass(frozen=True, slots=True)
class TextOnly:
    """The text of a file whose chunks are current: stored alone, nothing embedded."""

    source: Source
    generation: int
    path: str
    text: str
    anchors: tuple[Anchor, ...] = ()


def file_texts_store(documents: Sequence[TextOfFile]) -> None:
    """Store (or replace) the text of each document of a file source; other kinds (datasets) keep none."""
    rows = [
        FileText(
            source=d.source,
            generation=d.generation,
            path=d.path,
            text=d.text,
            anchors=[[a.label, a.start_line, a.end_line] for a in d.anchors],
        )
        for d in documents
        if d.source.kind == Source.Kind.FILE
    ]
    FileText.objects.bulk_create(
        rows,
        batch_size=200,  # texts run to a few hundred kB each: a bounded statement
        update_conflicts=True,
        unique_fields=["source", "generation", "path"],
        update_fields=["text", "anchors"],
    )


def file_texts_delete(*, source_id: int, generation: int | None = None, paths: Iterable[str] | None = None) -> int:
    """Delete the texts of ``paths`` (None: all) of a source's ``generation`` (None: every generation)."""
    rows = FileText.objects.filter(source_id=source_id)
    if generation is not None:
        rows = rows.filter(generation=generation)
    if paths is not None:
        rows = rows.filter(path__in=list(paths))
    return rows.delete()[0]


def file_texts_present(*, sources: Iterable[Source], about: Q | None = None) -> set[tuple[int, int, str]]:
    """(source id, generation, path) of the stored texts of ``sources`` (only paths ``about`` selects, if given)."""
    rows = FileText.objects.filter(source__in=list(sources))
    if about is not None:
        rows = rows.filter(about)
    return set(rows.values_list("source_id", "generation", "path"))


def anchors_of(stored: list) -> tuple[Anchor, ...]:
    return tuple(Anchor(label, start, end) for label, start, end in stored)
