"""Sign-in that resists brute force: failed passwords lock the account and the client address for a while.

Both login pages (/accounts/login/ and /admin/login/) use the forms below.
Before the password hasher runs, the form asks Redis whether the account or
the address is locked (two PTTLs): a locked sign-in is refused with how long
to wait (429, Retry-After) and costs no hashing, so a flood of guesses is
turned away cheaply and the hasher's cost stays off the search path. Each
attempt then counts against both, in a window of
RAG_LOGIN_FAILURE_WINDOW_SECONDS, before its password is checked (so
concurrent guesses cannot all slip in before the first lock);
RAG_LOGIN_FAILURES_PER_ACCOUNT (any address) or
RAG_LOGIN_FAILURES_PER_ADDRESS (any account) failures lock it for
RAG_LOGIN_LOCKOUT_SECONDS. A successful sign-in clears the account's count
and gives back only its own place in the address's: signing in to one's own
account must not buy more guesses at another. Unknown usernames count like
real ones, so a lock says nothing about whether the account exists.

Also, at most RAG_LOGIN_CONCURRENT_CHECKS passwords are checked at once per
web process: guesses from many addresses, each under its limits, still
cannot put a hasher on every core.

Redis down: sign-in is refused (503), fail closed. Without the counters a
flood would meet no lock, and a password, unlike a 192-bit API key, is worth
guessing; people already signed in keep their sessions, and keys keep
working (the API's limits fail open, access/ratelimit.py).

Why not django-axes: it records attempts in the database (a write per guess
on the database search reads from, unless given a cache handler) and needs
its own backend and middleware; this is the limiter the project already
runs, on the Redis every web worker shares, in one module.
"""

import contextlib
import functools
import hashlib
import logging
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NoReturn

import redis
from django import forms
from django.conf import settings
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponseBase

from access.ratelimit import redis_client

log = logging.getLogger(__name__)

# Under a flood every waiting guess holds a web thread that search could use
# (a loopback flood of 16 held all 8 of `make run`'s with a one-second wait):
# a person who meets another's check is told to retry instead.
SLOT_WAIT_SECONDS = 0.1
BUSY_RETRY_SECONDS = 2
UNAVAILABLE_RETRY_SECONDS = 30


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a sign-in was not tried, for the person (message) and for HTTP (status, Retry-After)."""

    message: str
    status: int
    retry_after: int


def wait_in_words(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    minutes = math.ceil(seconds / 60)
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def _keys(*, username: str, address: str) -> dict[str, str]:
    # Hashed: a username is whatever was typed, of any length.
    account = hashlib.sha256(username.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return {"account": f"account:{account}", "address": f"address:{address}"}


def _locked(kind: str, milliseconds: int) -> Refusal:
    seconds = max(1, math.ceil(milliseconds / 1000))
    whose = "for this account" if kind == "account" else "from your address"
    return Refusal(f"Too many failed sign-ins {whose}. Try again in {wait_in_words(seconds)}.", 429, seconds)


UNAVAILABLE = Refusal(
    "Sign-in is unavailable right now: its failure counter cannot be reached. "
    f"Try again in {wait_in_words(UNAVAILABLE_RETRY_SECONDS)}.",
    503,
    UNAVAILABLE_RETRY_SECONDS,
)
BUSY = Refusal(f"Sign-in is busy. Try again in {wait_in_words(BUSY_RETRY_SECONDS)}.", 429, BUSY_RETRY_SECONDS)


def signin_refusal(*, username: str, address: str) -> Refusal | None:
    """The lock that stops this sign-in now (the longer, if both are locked), or None. Runs no hasher."""
    if not any(limit > 0 for limit in _limits().values()):
        return None  # throttling is off: nothing to ask Redis, and nothing to refuse when it is down
    keys = _keys(username=username, address=address)
    try:
        pipe = redis_client().pipeline()
        for key in keys.values():
            pipe.pttl(f"rag:signin:lock:{key}")
        remaining = dict(zip(keys, pipe.execute(), strict=True))
    except redis.RedisError as exc:
        log.warning("sign-in refused: Redis unreachable: %s", exc)
        return UNAVAILABLE
    kind, milliseconds = max(remaining.items(), key=lambda item: item[1])
    return _locked(kind, milliseconds) if milliseconds > 0 else None


@dataclass(frozen=True, slots=True)
class Attempt:
    """A sign-in counted before its password is checked: the counters it took, and those it took the last place in."""

    keys: dict[str, str]
    last: tuple[str, ...]


def signin_attempt(*, username: str, address: str) -> Attempt | Refusal:
    """Count this sign-in against the account and the address before the hasher runs; a Refusal when over a limit.

    Counted before, not after, the password check: concurrent guesses each
    take a place, so however many arrive at once, at most the limit of them
    reach the hasher in a window. A success gives its places back.
    """
    limits = _limits()
    keys = {kind: key for kind, key in _keys(username=username, address=address).items() if limits[kind] > 0}
    try:
        pipe = redis_client().pipeline()
        for key in keys.values():
            pipe.incr(f"rag:signin:failures:{key}")
            pipe.expire(f"rag:signin:failures:{key}", settings.RAG_LOGIN_FAILURE_WINDOW_SECONDS, nx=True)
        counts = dict(zip(keys, pipe.execute()[::2], strict=True))
    except redis.RedisError as exc:
        log.warning("sign-in refused: Redis unreachable: %s", exc)
        return UNAVAILABLE
    over = [kind for kind, count in counts.items() if count > limits[kind]]
    if over:  # others took the last places while this one waited: locked as they will be
        return _lock(keys, over, address=address)
    return Attempt(keys, tuple(kind for kind, count in counts.items() if count == limits[kind]))


def signin_failed(attempt: Attempt, *, address: str) -> Refusal | None:
    """A wrong password: it keeps its places; the lock it set when it held the last one."""
    return _lock(attempt.keys, list(attempt.last), address=address) if attempt.last else None


def signin_succeeded(attempt: Attempt) -> None:
    """The account's failures are forgotten; the address gives back this attempt's place, no more."""
    try:
        pipe = redis_client().pipeline()
        if "account" in attempt.keys:
            pipe.delete(f"rag:signin:failures:{attempt.keys['account']}")
        if "address" in attempt.keys:
            pipe.decr(f"rag:signin:failures:{attempt.keys['address']}")
        pipe.execute()
    except redis.RedisError as exc:
        log.warning("sign-in count not cleared: Redis unreachable: %s", exc)


def _limits() -> dict[str, int]:
    return {"account": settings.RAG_LOGIN_FAILURES_PER_ACCOUNT, "address": settings.RAG_LOGIN_FAILURES_PER_ADDRESS}


def _lock(keys: dict[str, str], kinds: list[str], *, address: str) -> Refusal:
    lockout = settings.RAG_LOGIN_LOCKOUT_SECONDS
    try:
        pipe = redis_client().pipeline()
        for kind in kinds:
            pipe.set(f"rag:signin:lock:{keys[kind]}", 1, ex=lockout)
            pipe.delete(f"rag:signin:failures:{keys[kind]}")  # after the lockout, a full count again
        pipe.execute()
    except redis.RedisError as exc:
        log.warning("sign-in lock not set: Redis unreachable: %s", exc)
        return UNAVAILABLE
    log.warning("sign-in locked for %s s: %s (address %s)", lockout, " and ".join(kinds), address)
    return _locked(kinds[0], lockout * 1000)


def signin_unlock(*, username: str, address: str = "") -> None:
    """Clear the account's failures and lock (and the address's, when given), e.g. for a person locked out by someone
    else's guesses."""
    keys = _keys(username=username, address=address)
    names = [keys["account"], *([keys["address"]] if address else [])]
    try:
        redis_client().delete(*(f"rag:signin:{what}:{key}" for key in names for what in ("failures", "lock")))
    except redis.RedisError as exc:
        log.warning("sign-in count not cleared: Redis unreachable: %s", exc)


_slots: dict[int, threading.BoundedSemaphore] = {}
_slots_lock = threading.Lock()


@contextlib.contextmanager
def password_check_slot() -> Iterator[bool]:
    """One of this process's RAG_LOGIN_CONCURRENT_CHECKS password checks; yields False when none freed up in time."""
    size = settings.RAG_LOGIN_CONCURRENT_CHECKS
    with _slots_lock:
        slots = _slots.setdefault(size, threading.BoundedSemaphore(size))
    acquired = slots.acquire(timeout=SLOT_WAIT_SECONDS)
    try:
        yield acquired
    finally:
        if acquired:
            slots.release()


class ThrottledSignIn(AuthenticationForm):
    """Locks checked and the attempt counted before the password is; ``refusal`` says why a sign-in was not tried."""

    refusal: Refusal | None = None

    def clean(self) -> dict:
        username, password = self.cleaned_data.get("username"), self.cleaned_data.get("password")
        if not username or not password:
            return super().clean()  # a missing field is the form's own error, and no guess
        address = self.request.META.get("REMOTE_ADDR", "") if self.request else ""
        if refusal := signin_refusal(username=username, address=address):
            self._refuse(refusal)
        with password_check_slot() as acquired:
            if not acquired:
                self._refuse(BUSY)
            attempt = signin_attempt(username=username, address=address)
            if isinstance(attempt, Refusal):
                self._refuse(attempt)
            try:
                cleaned = super().clean()
            except forms.ValidationError:
                if refusal := signin_failed(attempt, address=address):
                    self._refuse(refusal)
                raise
        signin_succeeded(attempt)
        return cleaned

    def _refuse(self, refusal: Refusal) -> NoReturn:
        self.refusal = refusal
        raise forms.ValidationError(refusal.message, code="throttled")


class SignInForm(ThrottledSignIn):
    """The site's login page."""


class AdminSignInForm(ThrottledSignIn, AdminAuthenticationForm):
    """The admin's login page: staff only, as before."""


def throttled(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """A login view whose refused sign-ins answer the refusal's status and Retry-After instead of 200."""

    @functools.wraps(view)
    def wrapped(request: HttpRequest, *args, **kwargs) -> HttpResponseBase:
        response = view(request, *args, **kwargs)
        form = (getattr(response, "context_data", None) or {}).get("form")
        refusal = getattr(form, "refusal", None)
        if refusal is not None:
            response.status_code = refusal.status
            response["Retry-After"] = str(refusal.retry_after)
        return response

    return wrapped


class SignInView(LoginView):
    """The site's login page: the password form, and single sign-on's button beside it when configured."""

    def get_context_data(self, **kwargs) -> dict:
        from access.oidc.views import signin_button

        return super().get_context_data(**kwargs) | {"sso": signin_button()}


login_view = throttled(SignInView.as_view(redirect_authenticated_user=True, authentication_form=SignInForm))
