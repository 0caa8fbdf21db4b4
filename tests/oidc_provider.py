"""A minimal OpenID Connect provider on 127.0.0.1, in a thread: discovery, JWKS, authorize, token (PKCE checked).

``authorize`` signs in whoever ``claims`` describes at that moment (no login
form) and redirects back with a code; ``token`` refuses a code whose PKCE
verifier does not match its challenge, and returns an RS256 ID token signed
with ``signing_key`` (the published key unless a test swaps it) that expires
``lifetime`` seconds from now (negative: already expired). ``token_kid`` and
``jwks_kid`` (None: left out, as OpenID Connect Core allows while the JWKS
holds one key) and ``other_keys`` (published beside the first) shape the
token's header and the JWKS.
"""

import base64
import hashlib
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
from cryptography.hazmat.primitives.asymmetric import rsa

CLIENT_ID = "rag-site-test"
CLIENT_SECRET = "test-secret"
KID = "test-key-1"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@dataclass
class Provider:
    claims: dict[str, Any] = field(default_factory=lambda: {"sub": "user-1", "preferred_username": "alice"})
    lifetime: int = 300
    published_key: rsa.RSAPrivateKey = field(default_factory=rsa_key)
    signing_key: rsa.RSAPrivateKey | None = None
    token_kid: str | None = KID
    jwks_kid: str | None = KID
    other_keys: list[rsa.RSAPrivateKey] = field(default_factory=list)
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_requests: list[dict[str, str]] = field(default_factory=list)
    issuer: str = ""

    def jwks(self) -> dict:
        keys = []
        for n, key in enumerate([self.published_key, *self.other_keys]):
            jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key())) | {"alg": "RS256", "use": "sig"}
            kid = self.jwks_kid if n == 0 else f"other-key-{n}"
            keys.append(jwk if kid is None else jwk | {"kid": kid})
        return {"keys": keys}

    def discovery(self) -> dict:
        return {
            "issuer": self.issuer,
            "authorization_endpoint": f"{self.issuer}/authorize",
            "token_endpoint": f"{self.issuer}/token",
            "jwks_uri": f"{self.issuer}/jwks",
            "response_types_supported": ["code"],
            "id_token_signing_alg_values_supported": ["RS256"],
            "code_challenge_methods_supported": ["S256"],
        }

    def authorize(self, query: dict[str, str]) -> str:
        """The redirect back to the client, with a code bound to this request's nonce and PKCE challenge."""
        assert query["response_type"] == "code" and query["client_id"] == CLIENT_ID
        assert query["code_challenge_method"] == "S256"
        code = secrets.token_urlsafe(16)
        self.codes[code] = {"query": query, "claims": dict(self.claims)}
        return f"{query['redirect_uri']}?{urlencode({'code': code, 'state': query['state']})}"

    def token(self, form: dict[str, str]) -> tuple[int, dict]:
        self.token_requests.append(form)
        grant = self.codes.pop(form.get("code", ""), None)
        if grant is None or form.get("client_secret") != CLIENT_SECRET:
            return 400, {"error": "invalid_grant"}
        verifier = form.get("code_verifier", "")
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        if challenge != grant["query"]["code_challenge"] or form.get("redirect_uri") != grant["query"]["redirect_uri"]:
            return 400, {"error": "invalid_grant", "error_description": "PKCE verifier or redirect_uri mismatch"}
        now = int(time.time())
        claims = grant["claims"] | {
            "iss": self.issuer,
            "aud": CLIENT_ID,
            "iat": now,
            "exp": now + self.lifetime,
            "nonce": grant["query"]["nonce"],
        }
        headers = {} if self.token_kid is None else {"kid": self.token_kid}
        id_token = jwt.encode(claims, self.signing_key or self.published_key, algorithm="RS256", headers=headers)
        return 200, {"access_token": secrets.token_urlsafe(16), "token_type": "Bearer", "id_token": id_token}


class _Handler(BaseHTTPRequestHandler):
    provider: Provider

    def log_message(self, *args) -> None:
        pass

    def _json(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path == "/.well-known/openid-configuration":
            self._json(200, self.provider.discovery())
        elif url.path == "/jwks":
            self._json(200, self.provider.jwks())
        elif url.path == "/authorize":
            query = {key: values[0] for key, values in parse_qs(url.query).items()}
            self.send_response(302)
            self.send_header("Location", self.provider.authorize(query))
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self._json(404, {"error": "not_found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        form = {key: values[0] for key, values in parse_qs(self.rfile.read(length).decode()).items()}
        if urlsplit(self.path).path == "/token":
            self._json(*self.provider.token(form))
        else:
            self._json(404, {"error": "not_found"})


def provider_start() -> tuple[Provider, ThreadingHTTPServer]:
    provider = Provider()
    handler = type("Handler", (_Handler,), {"provider": provider})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    provider.issuer = f"http://127.0.0.1:{server.server_address[1]}"
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return provider, server
