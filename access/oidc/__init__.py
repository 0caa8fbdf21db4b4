"""Single sign-on with OpenID Connect: the code flow with PKCE, RS256 ID tokens checked against the provider's JWKS.

Built on mozilla-django-oidc (its views keep state, nonce and the PKCE
verifier in the session; its backend exchanges the code). What is ours:
configuration from RAG_OIDC_* with discovery (config.py), ID tokens checked
for issuer, audience and expiry as well as signature, people matched by
issuer and subject instead of email, new accounts with no grants and no
staff flag, and groups that follow a claim (backend.py).
"""
