"""python manage.py rag_apikey create|list|revoke: API keys for bots and agents."""

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from access.keys import api_key_create, api_key_revoke
from access.models import ApiKey
from kernel.errors import ApplicationError


class Command(BaseCommand):
    help = "Create (the key is printed once), list or revoke API keys."

    def add_arguments(self, parser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        create = sub.add_parser("create", help="Create a key and print it once.")
        create.add_argument("name", help="Who uses it, e.g. the bot's name.")
        create.add_argument("--bot-id", default="", help="The bot whose sources it sees (besides shared ones).")
        create.add_argument("--client-id", default="", help="The client whose sources it sees.")
        create.add_argument(
            "--channel", action="append", default=[], dest="channels", help="A channel it sees (repeatable)."
        )
        create.add_argument(
            "--manage",
            action="store_true",
            help="May list roots and jobs, start re-index jobs, manage documents, read health details and write shared "
            "memories.",
        )
        create.add_argument("--expires-days", type=int, help="Expires after this many days (default: never).")
        create.add_argument(
            "--rate-limit", type=int, help="Requests per minute (default RAG_RATE_LIMIT_PER_MINUTE; 0 = none)."
        )
        sub.add_parser("list", help="List keys (prefix, scope, state; never the key).")
        revoke = sub.add_parser("revoke", help="Revoke a key by its prefix.")
        revoke.add_argument("prefix")

    def handle(self, *args, action: str, **options) -> None:
        try:
            getattr(self, f"_{action}")(**options)
        except ApplicationError as exc:
            raise CommandError(exc.message) from None
        except ValidationError as exc:
            raise CommandError(
                "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())
            ) from None

    def _create(self, *, name, bot_id, client_id, channels, manage, expires_days, rate_limit, **_) -> None:
        if expires_days is not None and expires_days < 1:
            raise CommandError("--expires-days must be at least 1")
        if rate_limit is not None and rate_limit < 0:
            raise CommandError("--rate-limit must be 0 (no limit) or more")
        key, raw = api_key_create(
            name=name,
            bot_id=bot_id,
            client_id=client_id,
            channels=" ".join(channels),
            can_manage=manage,
            expires_at=timezone.now() + timedelta(days=expires_days) if expires_days else None,
            rate_limit_per_minute=rate_limit,
        )
        self.stderr.write(f"created API key {key.prefix} for {name!r}; it is shown once, store it now:")
        self.stdout.write(raw)

    def _list(self, **_) -> None:
        for key in ApiKey.objects.all():
            state = "revoked" if key.revoked_at else "active" if key.is_active else "expired"
            used = key.last_used_at.isoformat(timespec="seconds") if key.last_used_at else "never"
            self.stdout.write(
                f"{key.prefix}  {key.name}  [{key.scope_label}]{'  manage' if key.can_manage else ''}  {state}  "
                f"last used {used}"
            )

    def _revoke(self, *, prefix, **_) -> None:
        key = api_key_revoke(prefix=prefix)
        self.stdout.write(f"revoked API key {key.prefix} ({key.name})")
