"""What the admin pages of skills, tools and roots share: index status badges and the broker warning."""

from typing import TYPE_CHECKING

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html

from kernel.heartbeats import broker_ping
from sources.models import IndexStatus
from sources.queueing import BROKER_WAIT

if TYPE_CHECKING:
    # What the mixins are mixed into, for the type checker; at run time the class that uses them brings it.
    ModelAdminBase = admin.ModelAdmin
    FormBase = forms.BaseForm
else:
    ModelAdminBase = object
    FormBase = object


class BrokerWarningMixin(ModelAdminBase):
    """A warning on the list and after a save while the broker is unreachable: indexing waits for it."""

    def _broker_warn(self, request) -> None:
        if error := broker_ping():
            messages.warning(
                request,
                f"The broker (Redis) cannot be reached ({error}). Indexing is queued and "
                "starts by itself once the broker is back.",
            )

    def changelist_view(self, request, extra_context=None):
        if request.method == "GET":
            self._broker_warn(request)
        return super().changelist_view(request, extra_context)

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        self._broker_warn(request)


def status_badge(*, status: str, label: str, detail: str = "") -> str:
    """A status in its colour, by a class of static/css/admin.css: the Content-Security-Policy refuses style="..."."""
    return format_html('<b class="status status-{}">{}</b>{}', status, label, detail)


def index_status_badge(item) -> str:
    """The status of a skill or tool; why it failed, or that it waits for the broker."""
    label = item.get_index_status_display()
    waiting = item.index_status == IndexStatus.QUEUED and item.last_error.startswith(BROKER_WAIT)
    if (item.index_status == IndexStatus.FAILED or waiting) and item.last_error:
        return status_badge(status=item.index_status, label=label, detail=f": {item.last_error[:200]}")
    return status_badge(status=item.index_status, label=label)


class UnixNewlinesForm(FormBase):
    """A form mixin: text typed in the admin is stored with \\n line endings.

    Browsers send textarea text with \\r\\n; stored as is, bots would receive
    it and line counts, hashes and citations would disagree with the same
    text written to a file.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            if isinstance(field, forms.CharField):  # before any clean_<field> sees the text
                field.to_python = _unix_newlines(field.to_python)  # type: ignore[method-assign]  # this field's only


def _unix_newlines(to_python):
    def convert(value):
        value = to_python(value)
        return value.replace("\r\n", "\n").replace("\r", "\n") if isinstance(value, str) else value

    return convert
