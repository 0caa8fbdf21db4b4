"""The authentication backend for the provider's callback: checks the ID token, finds or makes the account.

Fail closed: a new account has no password, no staff flag and no grants;
only groups named by the groups claim (and existing already) give it
anything. Any failure (the provider down, a refused code, a bad signature,
an expired token, another issuer or audience) is logged and answers None,
which the callback view turns into a message on the login page.
"""

import logging
from typing import Any

import jwt
import requests
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.exceptions import SuspiciousOperation
from django.db import transaction
from django.utils import timezone
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from access.models import OidcIdentity
from access.oidc.config import HTTP_TIMEOUT_SECONDS, OidcConfig, ProviderUnavailable, endpoints, oidc_config

log = logging.getLogger(__name__)

SIGNING_ALGORITHM = "RS256"
# Clocks of the provider and this host may differ by a little; more would let an expired token in.
LEEWAY_SECONDS = 30


def library_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, from ours: its views and backend ask through here, never Django's settings."""
    config = oidc_config()
    fixed: dict[str, Any] = {
        "OIDC_USE_PKCE": True,
        "OIDC_PKCE_CODE_CHALLENGE_METHOD": "S256",
        "OIDC_USE_NONCE": True,
        "OIDC_RP_SIGN_ALGO": SIGNING_ALGORITHM,
        "OIDC_TIMEOUT": HTTP_TIMEOUT_SECONDS,
        "OIDC_AUTHENTICATION_CALLBACK_URL": "oidc-callback",
        "OIDC_STORE_ACCESS_TOKEN": False,
        "OIDC_STORE_ID_TOKEN": False,
    }
    if config is not None:
        fixed |= {
            "OIDC_RP_CLIENT_ID": config.client_id,
            # None, not "": a public client sends no client_secret at all (requests drops None fields).
            "OIDC_RP_CLIENT_SECRET": config.client_secret or None,
            "OIDC_RP_SCOPES": config.scopes,
        }
    if attr in fixed:
        return fixed[attr]
    if config is not None and attr.startswith("OIDC_OP_"):
        found = endpoints(config)
        return {
            "OIDC_OP_AUTHORIZATION_ENDPOINT": found.authorization_endpoint,
            "OIDC_OP_TOKEN_ENDPOINT": found.token_endpoint,
            "OIDC_OP_JWKS_ENDPOINT": found.jwks_uri,
            "OIDC_OP_USER_ENDPOINT": found.userinfo_endpoint,
        }[attr]
    from mozilla_django_oidc.utils import import_from_settings

    return import_from_settings(attr, *default)


class OidcBackend(OIDCAuthenticationBackend):
    get_settings = staticmethod(library_setting)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not the library's __init__: Django builds every backend for every password sign-in too, and that one
        # reads the endpoints (discovery, a network call). Ours are read in authenticate, for a callback only.
        self.UserModel = get_user_model()

    def authenticate(self, request, **kwargs: Any):
        # Only the callback view passes nonce and code_verifier: a password sign-in (or a login URL with ?code= in
        # it) never reaches the provider from here.
        config = oidc_config()
        if config is None or request is None or set(kwargs) != {"nonce", "code_verifier"}:
            return None
        try:
            found = endpoints(config)
            self.config = config
            self.OIDC_OP_TOKEN_ENDPOINT = found.token_endpoint
            self.OIDC_OP_USER_ENDPOINT = found.userinfo_endpoint
            self.OIDC_OP_JWKS_ENDPOINT = found.jwks_uri
            self.OIDC_RP_CLIENT_ID = config.client_id
            self.OIDC_RP_CLIENT_SECRET = config.client_secret or None
            self.OIDC_RP_SIGN_ALGO = SIGNING_ALGORITHM
            self.OIDC_RP_IDP_SIGN_KEY = None
            return super().authenticate(request, **kwargs)
        except (SuspiciousOperation, ProviderUnavailable, requests.RequestException, jwt.PyJWTError) as exc:
            log.warning("single sign-on refused: %s", exc)
            return None

    def verify_token(self, token: str, **kwargs: Any) -> dict:
        """The ID token's claims, once its signature (JWKS), issuer, audience, expiry and nonce all check out."""
        if not token:
            raise SuspiciousOperation("the token response has no id_token")
        key = self.retrieve_matching_jwk(token)
        try:
            payload = jwt.decode(
                token,
                key,
                algorithms=[SIGNING_ALGORITHM],
                audience=self.config.client_id,
                issuer=self.config.issuer,
                leeway=LEEWAY_SECONDS,
                options={"require": ["exp", "iat", "iss", "aud", "sub"]},
            )
        except jwt.PyJWTError as exc:
            raise SuspiciousOperation(f"ID token refused: {exc}") from exc
        if payload.get("nonce") != kwargs.get("nonce"):
            raise SuspiciousOperation("ID token refused: its nonce is not this sign-in's")
        return payload

    def retrieve_matching_jwk(self, token: str) -> jwt.PyJWK:
        """The provider's key that signed the token: the one its ``kid`` names, or without a ``kid`` the only one.

        The library's version reads ``kid`` from the token and from every key unconditionally (a KeyError, a 500,
        for a token without one), though OpenID Connect Core 10.1 lets a provider leave it out while its JWKS holds
        a single signing key. With several keys and no ``kid``, no key is guessed: the sign-in is refused.
        """
        response = requests.get(
            self.OIDC_OP_JWKS_ENDPOINT,
            verify=self.get_settings("OIDC_VERIFY_SSL", True),
            timeout=HTTP_TIMEOUT_SECONDS,
            proxies=self.get_settings("OIDC_PROXY", None),
        )
        response.raise_for_status()
        try:
            keys = response.json()["keys"]
        except (ValueError, KeyError, TypeError) as exc:
            raise SuspiciousOperation("the provider's JWKS is not a JSON object with keys") from exc
        header = jwt.get_unverified_header(token)
        algorithm = header.get("alg")
        signing = [
            key
            for key in keys
            if isinstance(key, dict) and key.get("use", "sig") == "sig" and key.get("alg", algorithm) == algorithm
        ]
        if "kid" in header:
            matching = [key for key in signing if key.get("kid") == header["kid"]]
            if not matching:
                raise SuspiciousOperation(f"ID token refused: the provider publishes no key {header['kid']!r}")
        else:
            matching = signing
            if len(matching) != 1:
                raise SuspiciousOperation(
                    f"ID token refused: it names no key (kid) and the provider publishes {len(matching)} signing keys"
                )
        return jwt.PyJWK(matching[-1])

    def get_userinfo(self, access_token: str, id_token: str, payload: dict) -> dict:
        """The ID token's claims, with the userinfo endpoint's (when there is one) for what the token left out."""
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT and access_token:
            extra = super().get_userinfo(access_token, id_token, payload)
            if extra.get("sub") != payload["sub"]:  # OpenID Connect Core 5.3.2: else the answer must not be used
                raise SuspiciousOperation("userinfo is about another subject than the ID token")
            claims = {**extra, **payload}
        return claims

    def verify_claims(self, claims: dict) -> bool:
        return bool(claims.get("sub"))

    def filter_users_by_claims(self, claims: dict):
        return self.UserModel.objects.filter(
            oidc_identities__issuer=self.config.issuer, oidc_identities__subject=claims["sub"]
        )

    @transaction.atomic
    def create_user(self, claims: dict):
        user = self.UserModel.objects.create_user(
            self._free_username(claims),
            email=claims.get("email", ""),
            first_name=str(claims.get("given_name", ""))[:150],
            last_name=str(claims.get("family_name", ""))[:150],
        )  # no password (unusable), not staff, no grants
        OidcIdentity.objects.create(user=user, issuer=self.config.issuer, subject=claims["sub"])
        log.info("single sign-on: account %r made for %s at %s", user.username, claims["sub"], self.config.issuer)
        return self.update_user(user, claims)

    def update_user(self, user, claims: dict):
        OidcIdentity.objects.filter(user=user, issuer=self.config.issuer, subject=claims["sub"]).update(
            last_signed_in_at=timezone.now()
        )
        groups_sync(user=user, claims=claims, config=self.config)
        return user

    def _free_username(self, claims: dict) -> str:
        wanted = str(claims.get("preferred_username") or claims.get("email") or claims["sub"])[:140]
        # A local account of that name stays its owner's: the newcomer gets a numbered name beside it.
        username, n = wanted, 1
        while self.UserModel.objects.filter(username__iexact=username).exists():
            n += 1
            username = f"{wanted}-{n}"
        return username


def groups_sync(*, user, claims: dict, config: OidcConfig) -> None:
    """Make the groups the claim decides follow it: with a map, the map's groups; without, every group."""
    if not config.groups_claim:
        return
    values = claims.get(config.groups_claim) or []
    if isinstance(values, str):
        values = [values]
    values = {str(value) for value in values}
    if config.group_map:
        decided = Group.objects.filter(name__in=set(config.group_map.values()))
        wanted = {config.group_map[value] for value in values if value in config.group_map}
    else:
        decided = Group.objects.all()
        wanted = values
    keep = [group for group in decided if group.name in wanted]
    user.groups.remove(*[group for group in decided if group.name not in wanted])
    user.groups.add(*keep)
