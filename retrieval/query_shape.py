"""What kind of query a search was given, from its text alone (no Django): the fusion weights and the code
preferences are chosen by it.

An identifier (``get_object_or_404``, ``ChangeList.get_filters``) or a one-word symbol (``F``) names something
to find by name: the lexical channel, which matches symbols and paths, is the better judge, and MiniLM has
little to say about a lone token. A question or a long text is the vector channel's. A pasted stack trace is
full of names (file paths, functions) among noise words.
"""

import enum
import re

# One name, dotted or not, optionally called: ``refund``, ``os.path.join``, ``get_filters()``.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*(?:\(\))?")
# A name that can only be code: snake_case, dotted, camelCase or CamelCase with a second capital.
_CODE_NAME = re.compile(r"[A-Za-z0-9]_[A-Za-z0-9]|[a-z]\.[A-Za-z_]|[a-z][A-Z]|[A-Z][a-z0-9]+[A-Z]|\(\)$")
# Python's, Java's and JavaScript's stack frames.
_TRACE = re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+|^\s+at [\w.$<>]+\(", re.M)
# Words past which a query is a pasted passage rather than a question.
LONG_WORDS = 30
# A question as a person asks it opens with a question word or ends in "?" ("how does the admin build changelist
# filters", "where is the retry delay computed?"); a description of what code does ("Returns the stream's encoding",
# a docstring's first sentence) does not.
_ASKING = re.compile(
    r"(how|where|what|why|which|when|who|whose|can|could|does|do|did|is|are|should|would|will|if)\b", re.IGNORECASE
)
# Names in any text: what a definition is matched against.
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


class QueryShape(enum.StrEnum):
    IDENTIFIER = "identifier"
    SYMBOL = "symbol"
    QUESTION = "question"
    TRACE = "trace"
    LONG = "long"


def query_shape(query: str) -> QueryShape:
    """The query's shape: a stack trace, one code name, one bare word, a long text or (anything else) a question."""
    text = query.strip()
    if _TRACE.search(text):
        return QueryShape.TRACE
    if _NAME.fullmatch(text):
        return QueryShape.IDENTIFIER if _CODE_NAME.search(text) else QueryShape.SYMBOL
    if len(text.split()) > LONG_WORDS:
        return QueryShape.LONG
    return QueryShape.QUESTION


def asks(query: str) -> bool:
    """Whether ``query`` is a question as a person asks it ("how does ...", "where is ...", "... ?"), not a
    description of what the wanted code does."""
    text = query.strip()
    return bool(_ASKING.match(text)) or text.endswith("?")


def name_words(text: str) -> frozenset[str]:
    """The lower-case words of the names in ``text``, whole and split (``ChangeList.get_filters``: changelist,
    change, list, get_filters, get, filters)."""
    found: set[str] = set()
    for name in _IDENTIFIER.findall(text):
        found.add(name.lower())
        for part in name.split("_"):
            found.update(word.lower() for word in _CAMEL.split(part) if word)
            if part:
                found.add(part.lower())
    return frozenset(found)
