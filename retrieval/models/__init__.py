"""The retrieval app's models: who may search what (access), and the lexical channel's index (lexical)."""

from access.models import AccessGrant, ApiKey
from retrieval.models.lexical import LexicalPosting, LexicalSourceStats, LexicalTerm

__all__ = ["AccessGrant", "ApiKey", "LexicalPosting", "LexicalSourceStats", "LexicalTerm"]
