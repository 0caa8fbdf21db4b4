"""python manage.py rag_search "query" [--k N] [--json] [--as KEY-PREFIX]: the API's search, from a shell."""

import json

from django.core.management.base import BaseCommand, CommandError
from pydantic import ValidationError

from access.identity import Identity, identity_for_key
from access.models import ApiKey
from access.rights import ALL_RIGHTS
from kernel.errors import ApplicationError
from retrieval.answers import search_answer
from retrieval.config import AnswerConfig
from retrieval.schemas import SearchIn, SearchOut, validation_message

# Without --as: everything, as a superuser signed in to the page sees it.
SUPERUSER = Identity(
    kind="user",
    name="the command line (superuser view)",
    bot_ids=None,
    client_ids=None,
    channels=None,
    rights=ALL_RIGHTS,
)


def identity_as(prefix: str | None) -> Identity:
    """The identity of the API key with this prefix (its scope, as the API would see it), or the superuser's."""
    if prefix is None:
        return SUPERUSER
    key = ApiKey.objects.filter(prefix=prefix).first()
    if key is None:
        raise CommandError(f"no API key has the prefix {prefix!r} (manage.py rag_apikey list shows them)")
    if not key.is_active:
        raise CommandError(f"API key {prefix!r} is revoked or expired: the API would refuse it")
    return identity_for_key(key)


def hits_text(out: SearchOut) -> str:
    """Ranked hits, each with its citation and the first lines of its text; for ``re:`` or a lone ``"exact text"``,
    the matching lines as grep prints them."""
    if out.grep is not None:
        return "\n".join(f"[{m.root}] {m.citation}: {m.text}" for m in out.grep.matches) or "no matching lines"
    if not out.hits:
        return "no hits"
    lines = []
    for hit in out.hits:
        lines.append(f"{hit.rank:>3}. {hit.citation}  score {hit.score:.4f}  [{hit.source}] {hit.title}")
        lines.extend(f"       {line}" for line in hit.content.strip().splitlines()[:3])
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Hybrid search, the same as POST /api/v1/search: as an API key's scope (--as) or everything."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "query", help='What to look for: words, or the query language (sym:NAME, re:PATTERN, "exact", kind:...).'
        )
        parser.add_argument("--k", type=int, default=None, help="How many hits (default: the API's).")
        parser.add_argument("--json", action="store_true", help="The API's JSON response body, unchanged.")
        parser.add_argument(
            "--as", dest="key_prefix", metavar="KEY-PREFIX", help="Search as this API key sees (its prefix)."
        )

    def handle(self, *args, query: str, k: int | None, json: bool, key_prefix: str | None, **options) -> None:
        identity = identity_as(key_prefix)
        if key_prefix is None:
            self.stderr.write("searching every source as a superuser would (--as KEY-PREFIX: as an API key sees)")
        try:
            payload = SearchIn.model_validate({"query": query, **({"k": k} if k is not None else {})})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'query'}: {validation_message(e)}" for e in exc.errors()
            )
            raise CommandError(problems) from None
        try:
            out = search_answer(identity, payload, config=AnswerConfig.from_settings()).out
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        for warning in out.warnings:
            self.stderr.write(f"warning: {warning}")
        self.stdout.write(_json_dumps(out) if json else hits_text(out))


def _json_dumps(out: SearchOut) -> str:
    return json.dumps(out.model_dump(mode="json"), ensure_ascii=False, indent=2)
