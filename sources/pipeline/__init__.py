"""The one indexing pipeline of every root, whatever its connector: ``root_index`` (sources/pipeline/run.py)."""

from sources.pipeline.run import root_index

__all__ = ["root_index"]
