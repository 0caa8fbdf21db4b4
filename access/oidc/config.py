"""Single sign-on's settings, and the provider's endpoints from discovery (fetched at the first sign-in, then kept)."""

import logging
import threading
from dataclasses import dataclass, field

import requests
from django.conf import settings

log = logging.getLogger(__name__)

# A provider that does not answer in this long is down as far as a person at the login page can tell.
HTTP_TIMEOUT_SECONDS = 10


class ProviderUnavailable(Exception):
    """The provider's discovery document cannot be had; the message says why."""


@dataclass(frozen=True)
class OidcConfig:
    issuer: str
    client_id: str
    client_secret: str
    scopes: str
    provider_name: str
    groups_claim: str
    group_map: dict[str, str] = field(default_factory=dict)
    # Explicit endpoints; empty ones come from discovery.
    authorization_endpoint: str = ""
    token_endpoint: str = ""
    jwks_uri: str = ""
    userinfo_endpoint: str = ""


@dataclass(frozen=True)
class Endpoints:
    authorization_endpoint: str
    token_endpoint: str
    jwks_uri: str
    userinfo_endpoint: str


def oidc_config() -> OidcConfig | None:
    """The configuration, or None when single sign-on is off (no client id)."""
    if not settings.RAG_OIDC_CLIENT_ID:
        return None
    return OidcConfig(
        issuer=(settings.RAG_OIDC_ISSUER or "").rstrip("/"),
        client_id=settings.RAG_OIDC_CLIENT_ID,
        client_secret=settings.RAG_OIDC_CLIENT_SECRET,
        scopes=settings.RAG_OIDC_SCOPES,
        provider_name=settings.RAG_OIDC_PROVIDER_NAME,
        groups_claim=settings.RAG_OIDC_GROUPS_CLAIM,
        group_map=dict(settings.RAG_OIDC_GROUP_MAP),
        authorization_endpoint=settings.RAG_OIDC_AUTHORIZATION_ENDPOINT or "",
        token_endpoint=settings.RAG_OIDC_TOKEN_ENDPOINT or "",
        jwks_uri=settings.RAG_OIDC_JWKS_URI or "",
        userinfo_endpoint=settings.RAG_OIDC_USERINFO_ENDPOINT or "",
    )


_discovered: dict[str, dict] = {}
_discovered_lock = threading.Lock()


def endpoints(config: OidcConfig) -> Endpoints:
    """Explicit endpoints where set, the rest from the issuer's discovery document (cached per process once read)."""
    explicit = Endpoints(
        config.authorization_endpoint, config.token_endpoint, config.jwks_uri, config.userinfo_endpoint
    )
    if explicit.authorization_endpoint and explicit.token_endpoint and explicit.jwks_uri:
        return explicit
    document = _discovery(config.issuer)
    try:
        return Endpoints(
            authorization_endpoint=explicit.authorization_endpoint or document["authorization_endpoint"],
            token_endpoint=explicit.token_endpoint or document["token_endpoint"],
            jwks_uri=explicit.jwks_uri or document["jwks_uri"],
            userinfo_endpoint=explicit.userinfo_endpoint or document.get("userinfo_endpoint", ""),
        )
    except KeyError as exc:
        raise ProviderUnavailable(f"the provider's discovery document has no {exc.args[0]}") from None


def _discovery(issuer: str) -> dict:
    with _discovered_lock:
        if issuer in _discovered:
            return _discovered[issuer]
    url = f"{issuer}/.well-known/openid-configuration"
    try:
        response = requests.get(url, timeout=HTTP_TIMEOUT_SECONDS)
        response.raise_for_status()
        document = response.json()
    except (requests.RequestException, ValueError) as exc:
        # Not cached: the next sign-in asks again, so a provider that comes back is used without a restart.
        raise ProviderUnavailable(f"{url} cannot be read: {exc}") from exc
    if not isinstance(document, dict):
        raise ProviderUnavailable(f"{url} is not a discovery document")
    if str(document.get("issuer", "")).rstrip("/") != issuer:
        # OpenID Connect Discovery 4.3: a document for another issuer must not be used.
        raise ProviderUnavailable(f"{url} names another issuer ({document.get('issuer')!r}), not {issuer!r}")
    with _discovered_lock:
        _discovered[issuer] = document
    return document


def discovery_forget() -> None:
    """Drop cached discovery documents (tests start a provider per test)."""
    with _discovered_lock:
        _discovered.clear()
