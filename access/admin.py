"""Admin for API keys, and access grants on users and groups."""

from django import forms
from django.contrib import admin, messages
from django.contrib.auth.admin import GroupAdmin, UserAdmin
from django.contrib.auth.models import Group, User
from django.db.models import Q
from django.template.response import TemplateResponse
from django.utils import timezone

from access.identity import Identity, identity_for_user
from access.keys import api_key_assign
from access.managing import FIELD_WORDS, form_scope_refused
from access.models import AccessGrant, ApiKey, OidcIdentity
from access.names import NamesInUse, names_in_use, suggest_names, unused_names
from sources.models import words

# A key or grant widens what its holder sees: the source forms' wording ("shared with every bot") says the opposite.
_GRANT_HELP = {
    "bot_id": "A bot whose sources this sees, besides shared ones. Empty: no bot's own sources.",
    "client_id": "A client whose sources this sees, besides shared ones. Empty: no client's own sources.",
    "channels": "Channels whose sources this sees, separated by spaces, besides those open to every channel.",
}


class ScopeNamesForm(forms.ModelForm):
    # Set per request by NamesOncePerPage: a user page builds one form per grant row, and each used to ask again.
    in_use: NamesInUse | None = None
    """A key's or grant's bot, client and channels: the names in use are suggested, the help says what they grant."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.in_use is None:
            self.in_use = names_in_use()
        suggest_names(self, self.in_use)
        for field, text in _GRANT_HELP.items():
            if field in self.fields:
                self.fields[field].help_text = text


def warn_unused_names(request, form: ScopeNamesForm) -> None:
    """After a save: a name no source uses yet grants nothing; say so, with the names that do."""
    values = {field: form.cleaned_data.get(field, "") for field in _GRANT_HELP}
    for sentence in unused_names(values, form.in_use or names_in_use()):
        messages.warning(request, sentence)


def _identity(request) -> Identity:
    identity = getattr(request, "_admin_identity", None)
    if identity is None:
        identity = request._admin_identity = identity_for_user(request.user)
    return identity


def _within_grants(form_class: type[ScopeNamesForm], identity: Identity) -> type[ScopeNamesForm]:
    """The key form refusing a bot, client or channels beyond the person's grants (a key for bot beta, from a person
    granted alpha, would read beta's sources). No bot, client or channel is fine: such a key sees shared sources
    only, which everyone does."""

    class WithinGrants(form_class):  # type: ignore[valid-type,misc]  # a class known only at run time
        def clean(self):
            cleaned = super().clean()
            if exc := form_scope_refused(identity, cleaned, not_wider=False):
                field = exc.details.get("field")
                what = FIELD_WORDS.get(field, "scope")
                self.add_error(
                    field if field in self.fields else None,
                    f"Your access grants do not cover {what} {', '.join(exc.details.get('refused', []))}: a key "
                    "may see only bots, clients and channels you may see yourself.",
                )
            return cleaned

    WithinGrants.__name__ = form_class.__name__
    return WithinGrants


def _bound_to_names(form_class: type[ScopeNamesForm]) -> type[ScopeNamesForm]:
    """The form class with this request's names in use: three queries per page, however many rows it has."""
    return type(form_class.__name__, (form_class,), {"in_use": names_in_use()})


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    form = ScopeNamesForm
    list_display = ["name", "prefix", "scope", "can_manage", "state", "last_used_at", "created_at"]
    list_filter = ["can_manage", "revoked_at"]
    search_fields = ["name", "prefix", "bot_id", "client_id"]
    readonly_fields = ["prefix", "last_used_at", "revoked_at", "created_by", "created_at"]
    fieldsets = [
        (None, {"fields": ["name", "prefix"]}),
        (
            "What it may see and do",
            {
                "fields": ["bot_id", "client_id", "channels", "can_manage", "rate_limit_per_minute"],
                "description": "Requests with this key see shared sources plus this bot's, client's and channels'. "
                "A request may narrow that, never widen it.",
            },
        ),
        ("Lifetime", {"fields": ["expires_at", "revoked_at", "last_used_at", "created_by", "created_at"]}),
    ]
    actions = ["revoke"]

    @admin.display(description="Scope")
    def scope(self, key: ApiKey) -> str:
        return key.scope_label

    @admin.display(description="State")
    def state(self, key: ApiKey) -> str:
        if key.revoked_at:
            return "revoked"
        return "active" if key.is_active else "expired"

    def get_queryset(self, request):
        keys = super().get_queryset(request)
        if request.user.is_superuser:
            return keys
        # A key sees what its scope names: listed, changed and revoked only by those who see as much (their grants
        # cover its bot, client and channels). A manage key holds every right over every row: superusers' alone.
        identity = _identity(request)
        within = keys.filter(can_manage=False)
        within = within.filter(Q(bot_id="") | Q(bot_id__in=identity.bot_ids or ()))
        within = within.filter(Q(client_id="") | Q(client_id__in=identity.client_ids or ()))
        granted = identity.channels or frozenset()
        ids = [pk for pk, channels in within.values_list("pk", "channels") if set(words(channels)) <= granted]
        return keys.filter(pk__in=ids)

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        # Only a superuser gives a key every right over every row (a person's own rights stop at their grants).
        return fields if request.user.is_superuser else [*fields, "can_manage"]

    def save_model(self, request, obj: ApiKey, form, change: bool) -> None:
        if not change:
            request._new_api_key = api_key_assign(obj)  # shown once by response_add, never stored
            obj.created_by = request.user
        super().save_model(request, obj, form, change)
        warn_unused_names(request, form)

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = _bound_to_names(super().get_form(request, obj, change, **kwargs))
        return form if request.user.is_superuser else _within_grants(form, _identity(request))

    def response_add(self, request, obj: ApiKey, post_url_continue=None):
        # The key is on this page only: not in a message (messages live in a cookie), not in a log.
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "key": obj,
            "raw_key": request._new_api_key,
            "title": f"API key for {obj.name}",
        }
        response = TemplateResponse(request, "admin/access/apikey/created.html", context)
        response["Cache-Control"] = "no-store"
        return response

    @admin.action(description="Revoke selected keys (requests with them get 401)", permissions=["change"])
    def revoke(self, request, queryset) -> None:
        count = queryset.filter(revoked_at__isnull=True).update(revoked_at=timezone.now())
        self.message_user(request, f"Revoked {count} key(s).", messages.SUCCESS)


class AccessGrantInline(admin.TabularInline):
    model = AccessGrant
    form = ScopeNamesForm
    extra = 0
    fields = ["bot_id", "client_id", "channels"]
    verbose_name = "search access grant"
    verbose_name_plural = "Search access: bots, clients and channels this account sees besides shared sources"

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        formset.form = _bound_to_names(formset.form)
        return formset


class OidcIdentityInline(admin.TabularInline):
    """Who at the provider signs in as this account: shown, and deletable (the next sign-in then makes a new account),
    never edited (a changed subject would hand the account to someone else)."""

    model = OidcIdentity
    extra = 0
    fields = readonly_fields = ("issuer", "subject", "created_at", "last_signed_in_at")
    verbose_name_plural = "Single sign-on: the provider's identity that signs in as this account"

    def has_add_permission(self, request, obj=None) -> bool:
        return False


admin.site.unregister(User)
admin.site.unregister(Group)


class GrantsWarnMixin:
    """Saving a user's or group's grants warns about names no source uses (see access/names.py)."""

    def save_formset(self, request, form, formset, change) -> None:
        super().save_formset(request, form, formset, change)  # type: ignore[misc]
        if formset.model is AccessGrant:
            for grant in formset.forms:
                if grant.has_changed() and not grant.cleaned_data.get("DELETE"):
                    warn_unused_names(request, grant)


@admin.register(User)
class UserWithGrantsAdmin(GrantsWarnMixin, UserAdmin):
    # templates/admin/auth/user/change_form.html shows the grants right after the account's name and password,
    # above the long permission lists, where they used to sit unseen at the bottom.
    inlines = [*UserAdmin.inlines, AccessGrantInline, OidcIdentityInline]


@admin.register(Group)
class GroupWithGrantsAdmin(GrantsWarnMixin, GroupAdmin):
    inlines = [*GroupAdmin.inlines, AccessGrantInline]
