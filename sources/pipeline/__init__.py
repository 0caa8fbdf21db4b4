"""The one indexing pipeline of every root, whatever its connector: ``root_index`` (sources/pipeline/run.py), and
the vector batches any bulk worker embeds: ``vectors_fill`` (sources/pipeline/vectors.py)."""

from sources.pipeline.run import root_index
from sources.pipeline.vectors import vectors_fill

__all__ = ["root_index", "vectors_fill"]
