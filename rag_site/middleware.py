"""Input that no view can use is refused at the door, with a clear 400."""

import re

from django.http import HttpRequest, HttpResponse, JsonResponse

# NUL and the other C0 control characters (and DEL); tab, newline and carriage
# return are text. PostgreSQL refuses NUL in text, so without this a NUL in
# a URL became a 500 naming the database.
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def control_characters_message(value: str, where: str) -> str | None:
    """Why ``value`` is refused, or None when it holds no control character."""
    found = CONTROL.search(value)
    if found is None:
        return None
    return f"{where} contains a control character (U+{ord(found.group()):04X}); NUL and control characters are not allowed"


class RefuseControlCharacters:
    """A NUL or control character in the path or the query string: 400 (JSON under /api/).

    JSON bodies are checked by the API schemas' text type (retrieval/schemas.py);
    form fields by Django's forms (ProhibitNullCharactersValidator).
    """

    def __init__(self, get_response) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        problem = control_characters_message(request.path, "the URL path")
        for name, values in request.GET.lists():
            if problem:
                break
            problem = control_characters_message(name, "a query-string parameter name") or next(
                (m for v in values if (m := control_characters_message(v, f"query-string parameter {name!r}"))), None)
        if problem is None:
            return self.get_response(request)
        if request.path.startswith("/api/"):
            return JsonResponse({"error": problem, "detail": []}, status=400)
        return HttpResponse(problem, status=400, content_type="text/plain; charset=utf-8")
