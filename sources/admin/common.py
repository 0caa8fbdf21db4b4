"""What the admin pages of skills, tools and roots share: index status badges and the broker warning."""

from django import forms
from django.contrib import messages
from django.utils.html import format_html

from sources.heartbeats import broker_ping
from sources.models import IndexStatus
from sources.queueing import BROKER_WAIT

_STATUS_COLOURS = {
    IndexStatus.INDEXED: "#1a7f37",
    IndexStatus.FAILED: "#b42318",
    IndexStatus.RUNNING: "#2457c5",
    IndexStatus.QUEUED: "#8a6d00",
    IndexStatus.PENDING: "#5b6570",
}


class BrokerWarningMixin:
    """A warning on the list and after a save while the broker is unreachable: indexing waits for it."""

    def _broker_warn(self, request) -> None:
        if error := broker_ping():
            messages.warning(request, f"The broker (Redis) cannot be reached ({error}). Indexing is queued and "
                                      "starts by itself once the broker is back.")

    def changelist_view(self, request, extra_context=None):
        if request.method == "GET":
            self._broker_warn(request)
        return super().changelist_view(request, extra_context)

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        self._broker_warn(request)


def index_status_badge(item) -> str:
    """The status of a skill or tool; why it failed, or that it waits for the broker."""
    colour = _STATUS_COLOURS.get(item.index_status, "#5b6570")
    label = item.get_index_status_display()
    waiting = item.index_status == IndexStatus.QUEUED and item.last_error.startswith(BROKER_WAIT)
    if (item.index_status == IndexStatus.FAILED or waiting) and item.last_error:
        return format_html('<b style="color:{}">{}</b>: {}', colour, label, item.last_error[:200])
    return format_html('<b style="color:{}">{}</b>', colour, label)


class UnixNewlinesForm:
    """A form mixin: text typed in the admin is stored with \\n line endings.

    Browsers send textarea text with \\r\\n; stored as is, bots would receive
    it and line counts, hashes and citations would disagree with the same
    text written to a file.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            if isinstance(field, forms.CharField):  # before any clean_<field> sees the text
                field.to_python = _unix_newlines(field.to_python)


def _unix_newlines(to_python):
    def convert(value):
        value = to_python(value)
        return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else value

    return convert
