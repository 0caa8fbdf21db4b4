"""The text each indexed file's chunks were cut from: what grep searches and what a web page's read serves."""

from django.contrib.postgres.indexes import GinIndex, OpClass
from django.db import models

from sources.models.base import Source


class FileText(models.Model):
    """One indexed file's text as its chunks cite it: a text file decoded, a document's or web page's extracted text.

    Written beside its IndexedFile (sources/file_texts.py) and gone with it; a
    trigram index (pg_trgm) over ``text`` gives grep its candidate files
    (retrieval/grep.py), RE2 then checks their lines.
    """

    source = models.ForeignKey(Source, on_delete=models.CASCADE, related_name="texts")
    generation = models.PositiveIntegerField(default=0)
    path = models.CharField(max_length=1024)
    text = models.TextField()
    # A document's pages, slides or sheets: [[label, start_line, end_line], ...]; [] for a text file.
    anchors = models.JSONField(default=list, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["source", "generation", "path"], name="file_text_unique")]
        indexes = [GinIndex(OpClass("text", name="gin_trgm_ops"), name="file_text_trgm")]
