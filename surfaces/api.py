"""The one NinjaAPI: /api/v1/..., OpenAPI docs at /api/docs."""

from django.db import InterfaceError, OperationalError
from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from kernel.errors import ApplicationError, error_headers, http_status
from surfaces.routes.documents import router as documents_router
from surfaces.routes.retrieval import router as retrieval_router
from surfaces.routes.sources import router as sources_router

api = NinjaAPI(title="rag-site API", version="1", docs_url="/docs", urls_namespace="api")
api.add_router("/v1", retrieval_router)
api.add_router("/v1", sources_router)
api.add_router("/v1", documents_router)


_LOCATIONS = {"body", "query", "path", "header", "cookie", "form", "file"}


def _field(location: list) -> str:
    # ("body", "payload", "k") -> "k": the caller knows where it sent it.
    parts = [str(p) for p in location]
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    if parts and parts[0] == "payload":
        parts = parts[1:]
    return ".".join(parts) or "request"


@api.exception_handler(ValidationError)
def validation_error(request, exc: ValidationError):
    messages = [f"{_field(list(err.get('loc', [])))}: {err.get('msg', 'invalid')}" for err in exc.errors]
    return api.create_response(
        request, {"error": "invalid request: " + "; ".join(messages), "detail": messages}, status=422
    )


@api.exception_handler(ApplicationError)
def application_error(request, exc: ApplicationError):
    status = http_status(exc)
    response = api.create_response(request, {"error": exc.message, "detail": exc.details}, status=status)
    return error_headers(response, status, exc.details)


@api.exception_handler(AuthenticationError)
def authentication_required(request, exc: AuthenticationError):
    # Every auth class passed: no key, no session, and anonymous access is off here.
    message = "authentication required: send 'Authorization: Bearer <API key>' (manage.py rag_apikey create) or sign in"
    return error_headers(api.create_response(request, {"error": message, "detail": []}, status=401), 401, {})


@api.exception_handler(Http404)
def not_found(request, exc: Http404):
    return api.create_response(request, {"error": "not found", "detail": []}, status=404)


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    # e.g. a body that is not JSON: "Cannot parse request body".
    return api.create_response(request, {"error": str(exc), "detail": []}, status=exc.status_code)


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def database_error(request, exc: OperationalError | InterfaceError):
    # Out to Django, also under DEBUG: surfaces.middleware.RetryLostConnection runs a read again or answers 503
    # for a lost connection, and anything else is the 500 it would have been.
    raise exc
