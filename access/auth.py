"""django-ninja auth for every endpoint: API key, signed-in session, or (when allowed) anonymous.

Each class returns an ``Identity`` (ninja puts it in ``request.auth``) after
counting the request against the caller's rate limit. A bad or revoked key
is refused outright (401), never treated as anonymous.
"""

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpRequest
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from access.identity import Identity, identity_anonymous, identity_for_key, identity_for_user
from access.keys import api_key_authenticate
from access.ratelimit import rate_limit_check
from access.rights import Right
from kernel import logs
from kernel.errors import Forbidden, Unauthenticated


def _admitted(identity: Identity, *, rate_limited: bool = True) -> Identity:
    logs.context_update(identity=identity.name)  # the request's later log records say who asked
    if rate_limited:
        rate_limit_check(bucket=identity.rate_bucket, limit=identity.rate_limit)
    return identity


class ApiKeyAuth(HttpBearer):
    """``Authorization: Bearer <API key>``: the key's own scope and permissions.

    ``anyone_when_database_down``: a key that cannot be checked (the database
    is down) makes the caller anonymous instead of failing the request.
    ``rate_limited``: False counts nothing against the key's rate limit (health).
    """

    def __init__(self, *, anyone_when_database_down: bool = False, rate_limited: bool = True) -> None:
        super().__init__()
        self.anyone_when_database_down = anyone_when_database_down
        self.rate_limited = rate_limited

    def __call__(self, request: HttpRequest) -> Identity | None:
        header = request.headers.get("Authorization", "")
        if not header:
            return None
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("the Authorization header must be 'Bearer <API key>'")
        return self.authenticate(request, token.strip())

    def authenticate(self, request: HttpRequest, token: str) -> Identity:
        try:
            key = api_key_authenticate(token)
        except DatabaseError:
            if not self.anyone_when_database_down:
                raise
            return identity_anonymous()
        return _admitted(identity_for_key(key), rate_limited=self.rate_limited)


class SessionAuth(APIKeyCookie):
    """A person signed in to the site: their grants; CSRF is checked for unsafe methods."""

    param_name = settings.SESSION_COOKIE_NAME

    def __init__(self, *, anyone_when_database_down: bool = False, rate_limited: bool = True) -> None:
        # CSRF is checked below, and only for signed-in users: an anonymous
        # request must fall through to the next auth, not fail here.
        super().__init__(csrf=False)
        self.anyone_when_database_down = anyone_when_database_down
        self.rate_limited = rate_limited

    def authenticate(self, request: HttpRequest, key: str | None) -> Identity | None:
        user = getattr(request, "user", None)
        try:
            signed_in = user is not None and user.is_authenticated  # reads the session
        except DatabaseError:
            if not self.anyone_when_database_down:
                raise
            return identity_anonymous()
        if not signed_in:
            return None
        if check_csrf(request) is not None:
            raise Forbidden("CSRF check failed: a signed-in request that changes state needs the X-CSRFToken header")
        return _admitted(identity_for_user(user), rate_limited=self.rate_limited)


class AnonymousAuth:
    """No credentials: shared sources only, and only when RAG_ANONYMOUS_SEARCH is on."""

    def __call__(self, request: HttpRequest) -> Identity | None:
        if not settings.RAG_ANONYMOUS_SEARCH:
            return None
        return _admitted(identity_anonymous(address=request.META.get("REMOTE_ADDR", "")))


class AnyoneAuth:
    """No credentials: anonymous whatever RAG_ANONYMOUS_SEARCH says, and not rate-limited.

    For health only: load balancers call it without a key, every few
    seconds, and an anonymous caller gets booleans, nothing else.
    """

    def __call__(self, request: HttpRequest) -> Identity:
        return identity_anonymous(address=request.META.get("REMOTE_ADDR", ""))


# Reading endpoints: any caller the settings admit. Managing endpoints: a key or a session, then the right they need.
READ_AUTH = [ApiKeyAuth(), SessionAuth(), AnonymousAuth()]
MANAGE_AUTH = [ApiKeyAuth(), SessionAuth()]
# Health: every caller gets an answer, never a 429 (a load balancer would take the node out of rotation); a bad key
# still gets 401 (access/refusals.py counts it); Right.VIEW_HEALTH_DETAILS adds the details.
HEALTH_AUTH = [
    ApiKeyAuth(anyone_when_database_down=True, rate_limited=False),
    SessionAuth(anyone_when_database_down=True, rate_limited=False),
    AnyoneAuth(),
]


def manage_required(request: HttpRequest, right: Right) -> Identity:
    """The caller, if it holds ``right`` (access.rights); else 403 naming the missing permission."""
    identity: Identity = request.auth  # type: ignore[attr-defined]  # set by ninja's auth classes above
    identity.require(right)
    return identity
