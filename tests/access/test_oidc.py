"""Single sign-on (access/oidc/) against a real provider on 127.0.0.1 (tests/oidc_provider.py), through the browser's
path: the login page's button, the provider's authorize redirect, the callback."""

from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from access.models import AccessGrant, OidcIdentity
from access.oidc.config import discovery_forget
from tests.oidc_provider import CLIENT_ID, CLIENT_SECRET, Provider, provider_start, rsa_key

pytestmark = pytest.mark.django_db

User = get_user_model()


@pytest.fixture
def provider(settings):
    provider, server = provider_start()
    discovery_forget()
    settings.RAG_OIDC_ISSUER = provider.issuer
    settings.RAG_OIDC_CLIENT_ID = CLIENT_ID
    settings.RAG_OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.RAG_OIDC_PROVIDER_NAME = "Acme ID"
    yield provider
    server.shutdown()
    server.server_close()
    discovery_forget()


def sign_in(client, *, tamper_state: bool = False):
    """Follow the flow: rag-site -> provider's authorize -> back to rag-site's callback; the callback's response."""
    start = client.get("/oidc/authenticate/", {"next": "/"})
    assert start.status_code == 302
    authorize = urlsplit(start["Location"])
    query = parse_qs(authorize.query)
    assert query["code_challenge_method"] == ["S256"] and query["code_challenge"][0]  # PKCE, every time
    back = requests.get(start["Location"], allow_redirects=False, timeout=10)
    assert back.status_code == 302
    callback = urlsplit(back.headers["Location"])
    params = {key: values[0] for key, values in parse_qs(callback.query).items()}
    if tamper_state:
        params["state"] = "not-the-state-this-browser-was-given"
    return client.get(callback.path, params)


def signed_in(client) -> bool:
    return "_auth_user_id" in client.session


def refused(response, client) -> bool:
    messages = [str(m) for m in response.wsgi_request._messages]
    return (
        response["Location"] == "/accounts/login/" and not signed_in(client) and any("did not" in m for m in messages)
    )


def test_a_first_sign_in_makes_an_account_with_no_grants_and_no_staff(client, provider):
    provider.claims = {"sub": "user-1", "preferred_username": "alice", "email": "alice@example.com"}
    response = sign_in(client)
    assert response.status_code == 302 and response["Location"] == "/"
    assert signed_in(client)
    user = User.objects.get(oidc_identities__issuer=provider.issuer, oidc_identities__subject="user-1")
    assert user.username == "alice" and user.email == "alice@example.com"
    assert not user.is_staff and not user.is_superuser and not user.has_usable_password()
    assert not user.groups.exists() and not AccessGrant.objects.filter(user=user).exists()
    assert provider.token_requests[-1]["code_verifier"]  # the verifier went to the token endpoint

    client.logout()
    sign_in(client)
    assert signed_in(client) and User.objects.count() == 1  # the same person, the same account


def test_a_local_account_is_never_handed_to_a_newcomer_with_its_name_or_email(client, provider):
    admin = User.objects.create_superuser("alice", email="alice@example.com", password="a-long-test-password")
    provider.claims = {"sub": "someone-else", "preferred_username": "alice", "email": "alice@example.com"}
    sign_in(client)
    newcomer = User.objects.get(oidc_identities__subject="someone-else")
    assert newcomer != admin and newcomer.username == "alice-2" and not newcomer.is_superuser
    assert int(client.session["_auth_user_id"]) == newcomer.pk


def test_a_callback_with_another_state_is_refused(client, provider):
    response = sign_in(client, tamper_state=True)
    assert refused(response, client)
    assert not User.objects.exists() and not provider.token_requests  # the code was never even exchanged


def test_an_id_token_signed_by_another_key_is_refused(client, provider):
    provider.signing_key = rsa_key()  # same kid, not the published key
    assert refused(sign_in(client), client)
    assert not User.objects.exists()


def test_an_expired_id_token_is_refused(client, provider):
    provider.lifetime = -120  # past the 30 s allowed for clock skew
    assert refused(sign_in(client), client)
    assert not User.objects.exists()


def test_an_id_token_for_another_client_is_refused(client, provider, settings):
    settings.RAG_OIDC_CLIENT_ID = "another-client"  # the provider still issues tokens for CLIENT_ID
    original = Provider.authorize

    def authorize_as_registered(self, query):
        return original(self, query | {"client_id": CLIENT_ID})

    Provider.authorize = authorize_as_registered  # type: ignore[method-assign]
    try:
        assert refused(sign_in(client), client)
    finally:
        Provider.authorize = original  # type: ignore[method-assign]
    assert not User.objects.exists()


def test_groups_follow_the_claim_through_the_map(client, provider, settings):
    engineers, support, other = (Group.objects.create(name=n) for n in ("Engineers", "Support", "Hand-picked"))
    AccessGrant.objects.create(group=engineers, bot_id="eng-bot")
    settings.RAG_OIDC_GROUPS_CLAIM = "groups"
    settings.RAG_OIDC_GROUP_MAP = {"eng": "Engineers", "help": "Support", "sales": "Sales"}
    provider.claims = {"sub": "user-1", "preferred_username": "bob", "groups": ["eng", "sales", "unmapped"]}
    sign_in(client)
    user = User.objects.get(username="bob")
    assert set(user.groups.values_list("name", flat=True)) == {"Engineers"}  # Sales does not exist: never made
    user.groups.add(other)  # given by an admin: the map does not decide it

    client.logout()
    provider.claims = provider.claims | {"groups": ["help"]}
    sign_in(client)
    assert set(user.groups.values_list("name", flat=True)) == {"Support", "Hand-picked"}


def test_without_a_map_claim_values_name_groups(client, provider, settings):
    Group.objects.create(name="Engineers")
    settings.RAG_OIDC_GROUPS_CLAIM = "groups"
    provider.claims = {"sub": "user-1", "preferred_username": "carol", "groups": ["Engineers", "Admins"]}
    sign_in(client)
    assert list(User.objects.get(username="carol").groups.values_list("name", flat=True)) == ["Engineers"]


def test_the_login_page_offers_the_provider_beside_the_password_form(client, provider):
    page = client.get("/accounts/login/").content.decode()
    assert "Sign in with Acme ID" in page and 'name="password"' in page


def test_local_accounts_keep_signing_in(client, provider):
    User.objects.create_user("dave", password="a-long-test-password")
    response = client.post("/accounts/login/", {"username": "dave", "password": "a-long-test-password"})
    assert response.status_code == 302 and signed_in(client)
    assert not provider.token_requests


def test_an_unreachable_provider_is_told_on_the_login_page(client, provider, settings):
    settings.RAG_OIDC_ISSUER = "http://127.0.0.1:1"  # nothing listens
    response = client.get("/oidc/authenticate/")
    assert response["Location"] == "/accounts/login/"
    assert "Acme ID cannot be reached" in client.get("/accounts/login/").content.decode()


def test_single_sign_on_is_off_without_a_client_id(client, settings):
    settings.RAG_OIDC_CLIENT_ID = ""
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/", {"code": "x", "state": "y"}).status_code == 404
    assert "Sign in with" not in client.get("/accounts/login/").content.decode()
    assert not OidcIdentity.objects.exists()


def test_the_admin_shows_who_signs_in_as_an_account(client, provider, admin_client):
    sign_in(client)
    user = User.objects.get(username="alice")
    page = admin_client.get(f"/admin/auth/user/{user.pk}/change/").content.decode()
    assert "user-1" in page and provider.issuer in page


@pytest.mark.parametrize("jwks_kid", [None, "test-key-1"], ids=["jwks-without-kid", "jwks-with-kid"])
def test_an_id_token_without_kid_is_checked_against_the_only_key(client, provider, jwks_kid):
    """OpenID Connect Core 10.1: a token may leave out "kid" while the JWKS holds one key (the crash of issue 39)."""
    provider.token_kid, provider.jwks_kid = None, jwks_kid
    response = sign_in(client)
    assert response.status_code == 302 and response["Location"] == "/"
    assert signed_in(client)


def test_an_id_token_without_kid_signed_by_another_key_is_refused(client, provider):
    provider.token_kid, provider.jwks_kid = None, None
    provider.signing_key = rsa_key()  # the only published key is not the one that signed
    assert refused(sign_in(client), client)
    assert not User.objects.exists()


def test_an_id_token_without_kid_is_refused_when_the_provider_publishes_two_keys(client, provider):
    provider.token_kid = None
    provider.other_keys = [rsa_key()]  # which one signed is not said: no key is guessed
    assert refused(sign_in(client), client)
    assert not User.objects.exists()


def test_an_id_token_naming_a_key_the_provider_does_not_publish_is_refused(client, provider):
    provider.token_kid = "rotated-away"
    assert refused(sign_in(client), client)
    assert not User.objects.exists()
