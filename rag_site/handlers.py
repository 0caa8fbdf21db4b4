"""Django's error views, answering JSON under /api/ so API callers never parse an HTML page."""

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from django.views import defaults


def _api(request) -> bool:
    return request.path.startswith("/api/")


def bad_request(request, exception=None):
    if not _api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse({"error": "the request body is too large", "detail": []}, status=413)
    return JsonResponse({"error": "bad request", "detail": []}, status=400)


def not_found(request, exception=None):
    if not _api(request):
        return defaults.page_not_found(request, exception)
    return JsonResponse({"error": f"no such endpoint: {request.method} {request.path} (see /api/docs)", "detail": []}, status=404)


def server_error(request):
    if not _api(request):
        return defaults.server_error(request)
    return JsonResponse({"error": "internal error; the server log has the details", "detail": []}, status=500)
