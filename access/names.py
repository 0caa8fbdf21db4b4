"""The bot, client and channel names in use, for the forms that grant them.

A name is free text, and a grant or key naming a bot no source is given to
sees nothing of it, silently: a typo ("alpah") grants nothing. So the forms
offer the names in use (a native ``<datalist>``: no script, works offline)
and, after a save, say which names no source uses yet.
"""

from dataclasses import dataclass

from django import forms
from django.utils.html import format_html, format_html_join

from sources.models import Source
from sources.models.base import words

FIELDS = ("bot_id", "client_id", "channels")
NOUNS = {"bot_id": "bot", "client_id": "client", "channels": "channel"}


@dataclass(frozen=True, slots=True)
class NamesInUse:
    """Each field's names given to at least one source (skill, tool, root, segment or document)."""

    bot_id: frozenset[str]
    client_id: frozenset[str]
    channels: frozenset[str]

    def of(self, field: str) -> frozenset[str]:
        return getattr(self, field)


def names_in_use() -> NamesInUse:
    """Three small queries over the sources' scope columns (distinct values, not rows)."""
    sources = Source.objects.all()
    channel_lists = sources.exclude(channels=[]).values_list("channels", flat=True).distinct()
    return NamesInUse(
        bot_id=frozenset(sources.exclude(bot_id="").values_list("bot_id", flat=True).distinct()),
        client_id=frozenset(sources.exclude(client_id="").values_list("client_id", flat=True).distinct()),
        channels=frozenset(name for names in channel_lists for name in names),
    )


def unused_names(values: dict[str, str], in_use: NamesInUse) -> list[str]:
    """One sentence per field whose names (``values``: the form's text per field) no source uses yet."""
    said = []
    for field in FIELDS:
        unknown = [name for name in words(values.get(field) or "") if name not in in_use.of(field)]
        if not unknown:
            continue
        noun = NOUNS[field] + ("s" if len(unknown) > 1 else "")
        known = ", ".join(sorted(in_use.of(field))) or "none yet"
        listed = ", ".join(f"“{name}”" for name in unknown)
        said.append(
            f"No source is given to {noun} {listed} yet, so this sees nothing of it until a skill, tool, root or "
            f"document is (a typo?). {NOUNS[field].capitalize()}s in use: {known}."
        )
    return said


class NameListInput(forms.TextInput):
    """A text input that suggests ``names`` as one types (the browser's own list; any other name is still allowed)."""

    def __init__(self, names: list[str], attrs: dict | None = None) -> None:
        super().__init__(attrs)
        self.names = names

    def render(self, name, value, attrs=None, renderer=None):
        list_id = f"{(attrs or {}).get('id') or name}-names"
        field = super().render(name, value, {**(attrs or {}), "list": list_id, "autocomplete": "off"}, renderer)
        options = format_html_join("", '<option value="{}">', ((n,) for n in self.names))
        return format_html('{}<datalist id="{}">{}</datalist>', field, list_id, options)


def suggest_names(form: forms.BaseForm, in_use: NamesInUse) -> None:
    """Give ``form``'s scope fields the names in use as suggestions (fields it does not have are left alone)."""
    for field in FIELDS:
        if field in form.fields:
            widget = form.fields[field].widget
            form.fields[field].widget = NameListInput(sorted(in_use.of(field)), attrs=widget.attrs)
