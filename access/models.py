"""Who may search what: API keys for bots and agents, grants for people."""

from django.conf import settings
from django.contrib.auth.models import Group
from django.db import models
from django.db.models import Q
from django.utils import timezone

from sources.models import Scoped


class ApiKey(Scoped):
    """A bot's or agent's credential, bound to one scope.

    Only ``prefix`` (public, shown in lists and logs) and the SHA-256 of the
    whole key are stored; the key itself is shown once, when it is created.
    The key carries 192 random bits, so a fast hash is enough: there is
    nothing to guess a dictionary word from.
    """

    name = models.CharField(max_length=200, help_text="Who uses it, e.g. the bot's name.")
    prefix = models.CharField(
        max_length=16, unique=True, editable=False, help_text="The key's public start, to recognise it."
    )
    key_hash = models.CharField(max_length=64, editable=False)
    can_manage = models.BooleanField(
        "manage permission",
        default=False,
        help_text="May list roots and index jobs and start re-index jobs (sees server paths), upload, list and "
        "delete documents of any scope, read health details, and write shared memories (no bot, client or channel).",
    )
    rate_limit_per_minute = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Requests per minute; empty: RAG_RATE_LIMIT_PER_MINUTE; 0: no limit.",
    )
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, editable=False, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "retrieval_apikey"  # created by the retrieval app; the model moved, the table did not
        ordering = ["name", "pk"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > timezone.now())


class AccessGrant(Scoped):
    """Lets a user, or everyone in a group, see one bot's, client's or channels' sources (besides shared ones)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="access_grants"
    )
    group = models.ForeignKey(Group, null=True, blank=True, on_delete=models.CASCADE, related_name="access_grants")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = "retrieval_accessgrant"  # created by the retrieval app; the model moved, the table did not
        # The admin console's two cross-source views are named permissions, not
        # just is_staff: a staff account sees only what someone granted it.
        # The same for the API (access.rights): staff status alone grants nothing.
        permissions = [
            ("view_index_overview", "Can view the index overview in the admin console"),
            ("use_try_search", "Can use the admin console's try-search"),
            # Rights of access.rights that no model's permission names.
            ("view_health_details", "Can read the health checks' details (ages, latencies, errors) in the API"),
            ("write_shared", "Can write to the shared scope (no bot, client or channel: every caller reads it)"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True) | Q(user__isnull=True, group__isnull=False),
                name="access_grant_user_or_group",
                violation_error_message="A grant is for one user or one group.",
            )
        ]

    def __str__(self) -> str:
        return f"{self.user or self.group}: {self.scope_label}"


class OidcIdentity(models.Model):
    """The person an identity provider vouches for (issuer + subject), tied to the local account made for them.

    Matched by subject, never by email: an email is whatever the provider lets a person type, and matching by it
    would hand a local account (an admin's) to whoever claims its address.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identities")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)
    last_signed_in_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "single sign-on identity"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_issuer_subject")]

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
