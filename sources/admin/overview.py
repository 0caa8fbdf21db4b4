"""The admin's index overview page: the whole index at a glance (staff only)."""

from django.contrib import admin
from django.template.response import TemplateResponse

from sources.selectors import index_overview


def overview_view(request):
    context = {**admin.site.each_context(request), "title": "Index overview", **index_overview()}
    return TemplateResponse(request, "admin/sources/overview.html", context)
