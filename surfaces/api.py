"""The one NinjaAPI: /api/v1/..., OpenAPI docs at /api/docs."""

import json

from django.db import InterfaceError, OperationalError
from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from kernel.errors import ApplicationError
from retrieval.schemas import validation_message
from surfaces.errors import application_error_response, error_response
from surfaces.routes.answer import router as answer_router
from surfaces.routes.documents import router as documents_router
from surfaces.routes.memories import router as memories_router
from surfaces.routes.retrieval import router as retrieval_router
from surfaces.routes.sources import health
from surfaces.routes.sources import router as sources_router

DESCRIPTION = """Hybrid search (vector and lexical, fused), tool retrieval and LLM-ready context with citations
over the skills, files, documents and tools this instance indexes.

Send `Authorization: Bearer <API key>` (an admin makes one with `manage.py rag_apikey create`); every answer is
limited to what the key may see. Start with `POST /api/v1/search` or `POST /api/v1/context`; `GET /api/v1/health`
answers without a key."""


class Api(NinjaAPI):
    def get_openapi_schema(self, *, path_prefix: str | None = None, path_params: dict | None = None):
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        # An operation anyone may call lists the empty requirement too: OpenAPI's way to say "credentials optional".
        for operations in schema["paths"].values():
            for operation in operations.values():
                view = operation.get("operationId", "")
                if view in _OPEN_TO_ANYONE and {} not in operation.setdefault("security", []):
                    operation["security"].append({})
        return schema


def _schema_with_server(view):
    """The schema names the server it was fetched from: importers (GPT Actions and the like) need an absolute base
    URL, and only the request knows it (the host as Django accepts it, behind the front's forwarded headers)."""

    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        if response.get("Content-Type", "").startswith("application/json"):
            schema = json.loads(response.content)
            schema["servers"] = [{"url": request.build_absolute_uri("/").rstrip("/")}]
            response.content = json.dumps(schema)
        return response

    return wrapped


api = Api(
    title="rag-site API",
    version="1",
    description=DESCRIPTION,
    docs_url="/docs",
    urls_namespace="api",
    docs_decorator=_schema_with_server,
)
api.add_router("/v1", retrieval_router)
api.add_router("/v1", sources_router)
api.add_router("/v1", documents_router)
api.add_router("/v1", memories_router)
api.add_router("/v1", answer_router)
# Operation ids (NinjaAPI.get_openapi_operation_id's form) of what answers without credentials (HEALTH_AUTH).
_OPEN_TO_ANYONE = {f"{view.__module__}_{view.__name__}".replace(".", "_") for view in (health,)}


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
    messages = [f"{_field(list(err.get('loc', [])))}: {validation_message(err)}" for err in exc.errors]
    return error_response(request, "invalid request: " + "; ".join(messages), status=422, errors=messages)


@api.exception_handler(ApplicationError)
def application_error(request, exc: ApplicationError):
    return application_error_response(request, exc)


@api.exception_handler(AuthenticationError)
def authentication_required(request, exc: AuthenticationError):
    # Every auth class passed: no key, no session, and anonymous access is off here.
    message = "authentication required: send 'Authorization: Bearer <API key>' (manage.py rag_apikey create) or sign in"
    return error_response(request, message, status=401)


@api.exception_handler(Http404)
def not_found(request, exc: Http404):
    return error_response(request, str(exc) or f"not found: {request.path}", status=404)


@api.exception_handler(HttpError)
def http_error(request, exc: HttpError):
    # e.g. a body that is not JSON: "Cannot parse request body".
    return error_response(request, str(exc), status=exc.status_code)


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def database_error(request, exc: OperationalError | InterfaceError):
    # Out to Django, also under DEBUG: surfaces.middleware.RetryLostConnection runs a read again or answers 503
    # for a lost connection, and anything else is the 500 it would have been.
    raise exc
