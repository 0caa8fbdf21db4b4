"""The retrieval app's models: the lexical channel's index (who may search what is the access app's)."""

from retrieval.models.lexical import LexicalPosting, LexicalSourceStats, LexicalTerm

__all__ = ["LexicalPosting", "LexicalSourceStats", "LexicalTerm"]
