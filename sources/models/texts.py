"""The text each indexed file's chunks were cut from: what grep searches and what a web page's read serves."""

from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models
from django.db.models.functions import Collate, Lower

from sources.models.base import Source


class FileText(models.Model):
    """One indexed file's text as its chunks cite it: a text file decoded, a document's or web page's extracted text.

    Written beside its IndexedFile (sources/file_texts.py) and gone with it; a
    trigram index (pg_trgm) over ``folded`` gives grep its candidate files
    (retrieval/grep.py), RE2 then checks their lines.
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="texts")
    generation = models.PositiveIntegerField(default=0)
    path = models.CharField(max_length=1024)
    text = models.TextField()
    # A document's pages, slides or sheets: [[label, start_line, end_line], ...]; [] for a text file.
    anchors = models.JSONField(default=list, blank=True)
    # ``text`` with ASCII letters lower-cased (the C collation: the same on every server, whatever its locale), what
    # grep's candidate query matches with LIKE: letter case aside without ILIKE or ~*, which fold each whole text
    # again per query (5-8 times slower on Django's source). Stored uncompressed (migration 0026): LIKE reads it
    # without decompressing.
    folded = models.GeneratedField(
        expression=Lower(Collate("text", "C")), output_field=models.TextField(), db_persist=True
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "generation", "path"], name="file_text_unique")]
        indexes = [GinIndex(OpClass("folded", name="gin_trgm_ops"), name="file_text_folded_trgm")]
