"""Sign-in throttling (issue 22, finding 5) on both login pages, with the real Redis and the real forms.

Each test signs in from addresses of its own (documentation ranges), so the
counters other tests leave in the suite's Valkey never meet its own.
"""

import itertools

import pytest
from django.contrib.auth.hashers import MD5PasswordHasher
from django.test import Client

from access import signin

PASSWORD = "the-right-password-42"
PAGES = ["/accounts/login/", "/admin/login/"]
_addresses = (f"203.0.113.{n}" for n in itertools.count(1))
_networks = (f"198.51.{n}" for n in itertools.count(1))


class CountingHasher(MD5PasswordHasher):
    """A fast hasher (these tests send hundreds of passwords) that counts how often a password is checked."""

    algorithm = "counting_md5"
    checks = 0

    def verify(self, password: str, encoded: str) -> bool:
        type(self).checks += 1
        return super().verify(password, encoded)


@pytest.fixture
def account(settings, django_user_model):
    settings.PASSWORD_HASHERS = ["tests.access.test_signin_throttle.CountingHasher"]
    # One login per test run would otherwise share a counter with the next test: a fresh name each time.
    user = django_user_model.objects.create_user(f"ada-{next(_addresses)}", password=PASSWORD, is_staff=True)
    CountingHasher.checks = 0
    return user


def sign_in(page: str, username: str, password: str, *, address: str):
    return Client().post(page, {"username": username, "password": password}, REMOTE_ADDR=address)


def signed_in(response) -> bool:
    return response.status_code == 302


@pytest.mark.parametrize("page", PAGES)
def test_500_wrong_passwords_then_the_right_one_is_refused_while_locked(page, account):
    address = next(_addresses)
    for n in range(500):
        sign_in(page, account.username, f"guess-{n}", address=address)
    response = sign_in(page, account.username, PASSWORD, address=address)
    assert not signed_in(response)
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "Too many failed sign-ins" in response.content.decode()
    assert "minutes" in response.content.decode()


@pytest.mark.parametrize("page", PAGES)
def test_an_account_is_locked_after_its_failures_from_many_addresses(page, account, settings):
    settings.RAG_LOGIN_FAILURES_PER_ACCOUNT = 5
    network = next(_networks)
    codes = [sign_in(page, account.username, "wrong", address=f"{network}.{n}").status_code for n in range(5)]
    assert codes == [200, 200, 200, 200, 429]  # the failure that locks says so
    response = sign_in(page, account.username, PASSWORD, address=f"{network}.200")
    assert response.status_code == 429
    assert "this account" in response.content.decode()


def test_the_lock_is_checked_before_the_password_hasher_runs(account, settings):
    settings.RAG_LOGIN_FAILURES_PER_ACCOUNT = 5
    address = next(_addresses)
    for _ in range(5):
        sign_in(PAGES[0], account.username, "wrong", address=address)
    checked = CountingHasher.checks
    assert checked == 5
    for _ in range(50):
        sign_in(PAGES[0], account.username, "wrong", address=address)
    sign_in(PAGES[1], account.username, PASSWORD, address=address)
    assert CountingHasher.checks == checked


def test_guesses_in_flight_hold_their_places_so_a_burst_cannot_outrun_the_lock(account, settings):
    settings.RAG_LOGIN_FAILURES_PER_ACCOUNT = 5
    address = next(_addresses)
    for _ in range(5):  # five guesses of a burst, their passwords still being checked
        assert isinstance(signin.signin_attempt(username=account.username, address=address), signin.Attempt)
    response = sign_in(PAGES[0], account.username, PASSWORD, address=address)
    assert response.status_code == 429 and "this account" in response.content.decode()
    assert CountingHasher.checks == 0


def test_a_successful_sign_in_resets_the_accounts_counter(account, settings):
    settings.RAG_LOGIN_FAILURES_PER_ACCOUNT = 5
    address = next(_addresses)
    for _ in range(2):
        for _ in range(4):
            assert sign_in(PAGES[0], account.username, "wrong", address=address).status_code == 200
        assert signed_in(sign_in(PAGES[0], account.username, PASSWORD, address=address))


def test_failures_from_one_address_lock_that_address_for_every_account(account, settings):
    settings.RAG_LOGIN_FAILURES_PER_ADDRESS = 8
    address = next(_addresses)
    for n in range(8):
        sign_in(PAGES[0], f"nobody-{n}", "wrong", address=address)
    response = sign_in(PAGES[0], account.username, PASSWORD, address=address)
    assert response.status_code == 429
    assert "your address" in response.content.decode()
    assert signed_in(sign_in(PAGES[0], account.username, PASSWORD, address=next(_addresses)))


def test_the_lock_expires_after_the_lockout(account, settings):
    settings.RAG_LOGIN_FAILURES_PER_ACCOUNT = 3
    settings.RAG_LOGIN_LOCKOUT_SECONDS = 1
    address = next(_addresses)
    for _ in range(3):
        sign_in(PAGES[0], account.username, "wrong", address=address)
    assert sign_in(PAGES[0], account.username, PASSWORD, address=address).status_code == 429
    signin.signin_unlock(username=account.username)  # what the expiry does, without sleeping through it
    assert signed_in(sign_in(PAGES[0], account.username, PASSWORD, address=address))


def test_sign_in_is_refused_while_redis_is_down(account):
    """Fail closed: with no counter, a flood would meet no lock, and passwords are worth guessing."""
    from tests.conftest import broker_outage

    address = next(_addresses)
    with broker_outage():
        response = sign_in(PAGES[0], account.username, PASSWORD, address=address)
    assert response.status_code == 503
    assert "Sign-in is unavailable" in response.content.decode()
    assert CountingHasher.checks == 0
    assert signed_in(sign_in(PAGES[0], account.username, PASSWORD, address=address))


def test_a_sign_in_that_finds_every_password_check_busy_is_told_to_retry(account, settings):
    settings.RAG_LOGIN_CONCURRENT_CHECKS = 1
    address = next(_addresses)
    with signin.password_check_slot() as acquired:  # another request's check, still hashing
        assert acquired
        response = sign_in(PAGES[0], account.username, PASSWORD, address=address)
    assert response.status_code == 429 and "Sign-in is busy" in response.content.decode()
    assert CountingHasher.checks == 0
    assert signed_in(sign_in(PAGES[0], account.username, PASSWORD, address=address))


def test_an_empty_password_is_a_form_error_not_a_failure(account, settings):
    settings.RAG_LOGIN_FAILURES_PER_ACCOUNT = 2
    address = next(_addresses)
    for _ in range(5):
        assert sign_in(PAGES[0], account.username, "", address=address).status_code == 200
    assert signed_in(sign_in(PAGES[0], account.username, PASSWORD, address=address))


@pytest.mark.unit
@pytest.mark.parametrize(
    ("seconds", "said"), [(1, "1 second"), (45, "45 seconds"), (60, "1 minute"), (61, "2 minutes"), (900, "15 minutes")]
)
def test_the_wait_is_said_in_words(seconds, said):
    assert signin.wait_in_words(seconds) == said
