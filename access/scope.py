"""What a caller may see: the one scope rule, as ORM filters and as SQL with named parameters.

A source is visible when its ``bot_id`` is empty (shared) or one of the
scope's ``bot_ids``, its ``client_id`` empty or one of ``client_ids``, and its
``channels`` empty (ungated) or sharing one with ``channels``. A source is
served while it is enabled and its ``expires_at`` (a memory's expiry) has not
passed. Chunks are
visible when their source is and they belong to its active generation, so a
model switch in progress is invisible until it flips.

Both forms below state that rule; tests/access/test_scope.py checks that
they select the same sources for every kind of scope.
"""

from dataclasses import dataclass

from django.db.models import F, Q, QuerySet
from django.db.models.functions import Now

from sources.models import Source

# The named parameters scope SQL uses; a query built around it must not use these names.
PARAMETERS = ("scope_bot_ids", "scope_client_ids", "scope_channels", "scope_kinds", "scope_source_ids")


@dataclass(frozen=True, slots=True)
class Scope:
    """What a caller may see. ``access.identity.scope_for`` builds it from an identity.

    ``None`` in a dimension means any value (superusers, internal commands).
    The default sees shared, ungated sources only: an unknown caller fails closed.
    """

    bot_ids: tuple[str, ...] | None = ()
    client_ids: tuple[str, ...] | None = ()
    channels: tuple[str, ...] | None = ()
    kinds: tuple[str, ...] = ()  # empty = every kind of source but evaluation datasets
    source_ids: tuple[int, ...] = ()  # empty = every source

    def source_filter(self, *, prefix: str = "", enabled_only: bool = True) -> Q:
        """The rule over sources as an ORM filter; ``prefix`` reaches them from another model ("source__")."""

        def q(**lookups) -> Q:
            return Q(**{prefix + name: value for name, value in lookups.items()})

        rule = q(enabled=True) & (q(expires_at__isnull=True) | q(expires_at__gt=Now())) if enabled_only else Q()
        if self.bot_ids is not None:
            rule &= q(bot_id="") | q(bot_id__in=self.bot_ids) if self.bot_ids else q(bot_id="")
        if self.client_ids is not None:
            rule &= q(client_id="") | q(client_id__in=self.client_ids) if self.client_ids else q(client_id="")
        if self.channels is not None:
            rule &= (
                q(channels__len=0) | q(channels__overlap=list(self.channels)) if self.channels else q(channels__len=0)
            )
        # Kept evaluation data never shows in real searches.
        rule &= q(kind__in=self.kinds) if self.kinds else ~q(kind=Source.Kind.DATASET)
        if self.source_ids:
            rule &= q(pk__in=self.source_ids)
        return rule

    def chunk_filter(self) -> Q:
        """The rule over chunks as an ORM filter: visible sources, active generation only."""
        return Q(generation=F("source__active_generation")) & self.source_filter(prefix="source__")

    def source_ids_sql(self, *, enabled_only: bool = True) -> QuerySet:
        """The visible sources' ids as a subquery, for ORM filters (``source__in=scope.source_ids_sql()``)."""
        return Source.objects.filter(self.source_filter(enabled_only=enabled_only)).values("pk")

    def source_sql(self, *, alias: str = "s", enabled_only: bool = True) -> tuple[str, dict]:
        """The rule over sources ``alias`` as a WHERE fragment with named parameters (``PARAMETERS``)."""
        clauses = (
            [f"{alias}.enabled", f"({alias}.expires_at IS NULL OR {alias}.expires_at > now())"]
            if enabled_only
            else ["TRUE"]
        )
        params: dict = {}
        if self.bot_ids is not None:
            clauses.append(f"({alias}.bot_id = '' OR {alias}.bot_id = ANY(%(scope_bot_ids)s::text[]))")
            params["scope_bot_ids"] = list(self.bot_ids)
        if self.client_ids is not None:
            clauses.append(f"({alias}.client_id = '' OR {alias}.client_id = ANY(%(scope_client_ids)s::text[]))")
            params["scope_client_ids"] = list(self.client_ids)
        if self.channels is not None:
            clauses.append(
                f"(cardinality({alias}.channels) = 0 OR {alias}.channels::text[] && %(scope_channels)s::text[])"
            )
            params["scope_channels"] = list(self.channels)
        if self.kinds:
            clauses.append(f"{alias}.kind = ANY(%(scope_kinds)s::text[])")
            params["scope_kinds"] = list(self.kinds)
        else:
            clauses.append(f"{alias}.kind <> '{Source.Kind.DATASET.value}'")
        if self.source_ids:
            clauses.append(f"{alias}.id = ANY(%(scope_source_ids)s::bigint[])")
            params["scope_source_ids"] = list(self.source_ids)
        return " AND ".join(clauses), params

    def chunk_sql(self, *, chunk: str = "c", source: str = "s") -> tuple[str, dict]:
        """The rule over chunks ``chunk`` joined to their sources ``source``, like ``source_sql``."""
        where, params = self.source_sql(alias=source)
        return f"{chunk}.generation = {source}.active_generation AND {where}", params
