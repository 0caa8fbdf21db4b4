"""The retrieval app's models: who may search what (access), and the lexical channel's index (lexical)."""

from retrieval.models.access import AccessGrant, ApiKey
from retrieval.models.lexical import LexicalPosting, LexicalSourceStats, LexicalTerm

__all__ = ["AccessGrant", "ApiKey", "LexicalPosting", "LexicalSourceStats", "LexicalTerm"]
