"""The search bench's queries: a fixed, seeded mix of what people and bots send. Pure Python."""

import enum
import random
from collections.abc import Iterator


class QueryKind(enum.StrEnum):
    QUESTION = "question"  # natural language
    IDENTIFIER = "identifier"  # a name from code
    COMMON = "common"  # one to three very common words
    STOPWORDS = "stopwords"  # nothing but stop words: the substring fallback
    LONG = "long"  # about 2,000 characters of common words: the worst case

    @classmethod
    def parse(cls, value: str) -> "QueryKind":
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"unknown query kind {value!r}; valid kinds: {', '.join(k.value for k in cls)}") from None


# Share of each kind in the load runs. Mostly questions and names, as in the
# eval sets; long queries are rare in real traffic but set the p99.
MIX = {
    QueryKind.QUESTION: 0.60,
    QueryKind.IDENTIFIER: 0.20,
    QueryKind.COMMON: 0.10,
    QueryKind.STOPWORDS: 0.05,
    QueryKind.LONG: 0.05,
}

QUESTIONS = (
    "how do I redirect to another page after a form is submitted",
    "what does the csrf middleware check on a post request",
    "how to return a 404 page when an object does not exist",
    "how are database transactions committed or rolled back",
    "how do I run a task later with a countdown",
    "what happens when a celery worker is killed while running a task",
    "how to reshape an array without copying the data",
    "how does broadcasting work when adding arrays of different shapes",
    "how to compute the inverse of a matrix",
    "what is the difference between a view and a copy of an array",
    "how to define a custom template filter",
    "how do I add a field to a model with a default value",
    "how are static files collected for deployment",
    "how do I send an email with an attachment",
    "how to sign a cookie so the client cannot change it",
    "how to solve a system of linear equations symbolically",
    "how do I differentiate an expression with respect to x",
    "how to find the shortest path between two nodes in a graph",
    "how to load a pretrained tokenizer from a local directory",
    "how is attention masked for padding tokens",
    "how to move a tensor to the gpu and back",
    "how to save and load model weights",
    "how to compute gradients without tracking history",
    "how do I cache the result of an expensive function",
    "how to paginate a long list of results",
    "how to validate an email address in a form",
    "how to write a command line option with a default",
    "how to render a template with a context dictionary",
    "how to parse a date string with a time zone",
    "how to retry a failed network request with a backoff",
    "what does the password reset view do",
    "how do signals notify other parts of the application",
    "how to generate random numbers with a fixed seed",
    "how to sort an array along an axis",
    "how to read a file in chunks to save memory",
    "how to format sql statements for logging",
    "how are migrations applied in order",
    "how to register a model in the admin site",
    "how to integrate a function numerically",
    "why does the query return duplicate rows after a join",
)

IDENTIFIERS = (
    "HttpResponseRedirect",
    "get_object_or_404",
    "select_related",
    "QuerySet.prefetch_related",
    "apply_async",
    "ndarray.reshape",
    "np.linalg.solve",
    "torch.no_grad",
    "AutoTokenizer.from_pretrained",
    "csrf_exempt",
    "ForeignKey",
    "on_delete=models.CASCADE",
    "TemplateView",
    "reverse_lazy",
    "transaction.atomic",
    "shared_task",
    "broadcast_to",
    "einsum",
    "DataLoader",
    "state_dict",
    "nx.shortest_path",
    "sympy.diff",
    "validate_email",
    "click.option",
    "jinja2.Environment",
    "BaseModel.model_validate",
    "scipy.integrate.quad",
    "sqlparse.format",
    "LoginRequiredMixin",
    "attention_mask",
)

COMMON = (
    "error",
    "return value",
    "file",
    "data",
    "default",
    "test case",
    "name",
    "list of strings",
    "type",
    "function",
    "object",
    "input output",
    "size",
    "string",
    "model",
    "value error",
)

STOPWORDS = (
    "to be or not to be",
    "the",
    "it is what it is",
    "and then",
    "all of them",
    "here and there",
    "over and over again",
    "what is it",
    "how do I do it",
    "once more",
)

# The commonest words of code and its documentation: each matches a large
# share of any corpus, so OR-ing many of them is the lexical channel's worst case.
LONG_WORDS = (
    "return",
    "value",
    "type",
    "function",
    "default",
    "name",
    "self",
    "test",
    "error",
    "input",
    "output",
    "size",
    "true",
    "false",
    "none",
    "list",
    "string",
    "object",
    "class",
    "model",
    "data",
    "file",
    "set",
    "get",
    "use",
    "call",
    "check",
    "option",
    "key",
    "state",
    "base",
    "import",
    "raise",
    "args",
    "kwargs",
    "shape",
    "array",
    "number",
    "version",
    "config",
    "init",
    "module",
    "dict",
    "tuple",
    "int",
    "float",
    "bool",
    "index",
    "result",
    "method",
    "instance",
    "argument",
    "parameter",
    "field",
    "format",
    "path",
    "user",
    "time",
    "example",
    "case",
)
LONG_CHARS = 2000  # the API's limit on a query


def long_query(seed: int) -> str:
    """About ``LONG_CHARS`` characters of ``LONG_WORDS`` in a seeded order, never more."""
    rng = random.Random(seed)
    words: list[str] = []
    length = -1
    while True:
        word = rng.choice(LONG_WORDS)
        if length + 1 + len(word) > LONG_CHARS:
            return " ".join(words)
        words.append(word)
        length += 1 + len(word)


WORST_CASE = long_query(0)

_FIXED = {
    QueryKind.QUESTION: QUESTIONS,
    QueryKind.IDENTIFIER: IDENTIFIERS,
    QueryKind.COMMON: COMMON,
    QueryKind.STOPWORDS: STOPWORDS,
    QueryKind.LONG: tuple(long_query(seed) for seed in range(8)),
}


def queries_of(kind: QueryKind) -> tuple[str, ...]:
    """Every query of a kind, in a fixed order."""
    return _FIXED[kind]


def query_stream(*, seed: int, kinds: tuple[QueryKind, ...] = tuple(MIX)) -> Iterator[tuple[QueryKind, str]]:
    """An endless seeded stream of (kind, query), kinds drawn by ``MIX`` (renormalised over ``kinds``)."""
    rng = random.Random(seed)
    weights = [MIX[kind] for kind in kinds]
    while True:
        kind = rng.choices(kinds, weights)[0]
        yield kind, rng.choice(_FIXED[kind])
