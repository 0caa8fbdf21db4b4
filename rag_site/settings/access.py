"""Identity and access: anonymous search, rate limits, sign-in lockouts."""

from django.core.exceptions import ImproperlyConfigured

from rag_site.settings_registry import read_bool, read_int, read_list, read_str, read_url

# Without credentials the API answers 401. On: anonymous callers may read
# shared sources (those with no bot, client or channel) through the search
# endpoints. Off by default: "shared" means shared among your bots and
# people, not with whoever reaches the port.
RAG_ANONYMOUS_SEARCH = read_bool("RAG_ANONYMOUS_SEARCH")
# Requests per minute per API key or signed-in person (a key can set its own;
# 0 = no limit), and per client address for anonymous callers. Counted in
# Redis, so the budget holds across web workers.
RAG_RATE_LIMIT_PER_MINUTE = read_int("RAG_RATE_LIMIT_PER_MINUTE")
RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE = read_int("RAG_RATE_LIMIT_ANONYMOUS_PER_MINUTE")
# Answers 401 or 403 per client address per minute under /api/ and on /mcp
# before that address gets 429 until the minute ends (0 = no limit). A
# misconfigured client makes a few; a key guesser made ~520 a second.
RAG_AUTH_FAILURES_PER_MINUTE = read_int("RAG_AUTH_FAILURES_PER_MINUTE")
# Sign-in (both login pages): failed passwords per account, and per client
# address whatever the account, within the window, before the account or
# address is locked for the lockout (0 = no lock). The lock is checked before
# the password hasher runs; a successful sign-in clears the account's count.
RAG_LOGIN_FAILURES_PER_ACCOUNT = read_int("RAG_LOGIN_FAILURES_PER_ACCOUNT")
RAG_LOGIN_FAILURES_PER_ADDRESS = read_int("RAG_LOGIN_FAILURES_PER_ADDRESS")
RAG_LOGIN_FAILURE_WINDOW_SECONDS = read_int("RAG_LOGIN_FAILURE_WINDOW_SECONDS")
RAG_LOGIN_LOCKOUT_SECONDS = read_int("RAG_LOGIN_LOCKOUT_SECONDS")
# Password checks at once per web process (hashing is slow on purpose, ~0.3 s
# of a core); one more is told to retry in a moment, so a flood of guesses
# from many addresses cannot take every core and web thread from search.
RAG_LOGIN_CONCURRENT_CHECKS = read_int("RAG_LOGIN_CONCURRENT_CHECKS")
# The search page needs a signed-in account.
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "search"
LOGOUT_REDIRECT_URL = "login"

# --- Single sign-on (OpenID Connect, access/oidc/) ------------------------------
# Off unless a client id is set. People signed in this way get an account with no grants and no staff flag
# (fail closed); only groups mapped from RAG_OIDC_GROUPS_CLAIM give them anything. Local accounts keep working.
RAG_OIDC_ISSUER = read_url("RAG_OIDC_ISSUER")
RAG_OIDC_CLIENT_ID = read_str("RAG_OIDC_CLIENT_ID")
RAG_OIDC_CLIENT_SECRET = read_str("RAG_OIDC_CLIENT_SECRET")
RAG_OIDC_AUTHORIZATION_ENDPOINT = read_url("RAG_OIDC_AUTHORIZATION_ENDPOINT")
RAG_OIDC_TOKEN_ENDPOINT = read_url("RAG_OIDC_TOKEN_ENDPOINT")
RAG_OIDC_JWKS_URI = read_url("RAG_OIDC_JWKS_URI")
RAG_OIDC_USERINFO_ENDPOINT = read_url("RAG_OIDC_USERINFO_ENDPOINT")
RAG_OIDC_SCOPES = read_str("RAG_OIDC_SCOPES")
RAG_OIDC_PROVIDER_NAME = read_str("RAG_OIDC_PROVIDER_NAME")
RAG_OIDC_GROUPS_CLAIM = read_str("RAG_OIDC_GROUPS_CLAIM")


def _group_map(pairs: list[str]) -> dict[str, str]:
    mapped = {}
    for pair in pairs:
        value, sep, group = pair.partition("=")
        if not sep or not value.strip() or not group.strip():
            raise ImproperlyConfigured(f"RAG_OIDC_GROUP_MAP: {pair!r} is not CLAIM_VALUE=Group name")
        mapped[value.strip()] = group.strip()
    return mapped


RAG_OIDC_GROUP_MAP = _group_map(read_list("RAG_OIDC_GROUP_MAP"))
if RAG_OIDC_CLIENT_ID and not RAG_OIDC_ISSUER:
    # The issuer is what an ID token's "iss" is checked against, so it is needed even with explicit endpoints.
    raise ImproperlyConfigured("RAG_OIDC_CLIENT_ID is set but RAG_OIDC_ISSUER is not: single sign-on needs both")
if RAG_OIDC_ISSUER and not RAG_OIDC_CLIENT_ID:
    raise ImproperlyConfigured("RAG_OIDC_ISSUER is set but RAG_OIDC_CLIENT_ID is not: single sign-on needs both")
if "openid" not in RAG_OIDC_SCOPES.split():
    raise ImproperlyConfigured(f"RAG_OIDC_SCOPES must include openid, got {RAG_OIDC_SCOPES!r}")
# Always listed: whether single sign-on is on is decided per sign-in (access/oidc/config.py), so a test or a
# restart with other settings needs no other backend list. It answers only its own callback.
AUTHENTICATION_BACKENDS = ["django.contrib.auth.backends.ModelBackend", "access.oidc.backend.OidcBackend"]
