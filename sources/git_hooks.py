"""A git root's webhook secret and the check of a push event's signature (GitHub, Gitea, GitLab).

The secret is never stored: it is derived from SECRET_KEY and the root's
random salt (``git_webhook_salt``), so neither a database dump nor the admin
can give it back, and a new salt (rotate) revokes the old one at once.
Changing SECRET_KEY changes every root's webhook secret too.
"""

import hashlib
import hmac
import secrets
from collections.abc import Mapping

from sources.models import WorkspaceRoot

GITHUB_HEADER = "X-Hub-Signature-256"  # "sha256=" + hex HMAC-SHA256 of the body
GITEA_HEADER = "X-Gitea-Signature"  # hex HMAC-SHA256 of the body
GITLAB_HEADER = "X-Gitlab-Token"  # the shared secret itself


def webhook_secret(*, root: WorkspaceRoot, secret_key: str) -> str:
    """The root's webhook secret ("" while none was set)."""
    if not root.git_webhook_salt:
        return ""
    message = f"rag-site git webhook:{root.pk}:{root.git_webhook_salt}".encode()
    return hmac.new(secret_key.encode(), message, hashlib.sha256).hexdigest()


def webhook_rotate(*, root: WorkspaceRoot, secret_key: str) -> str:
    """Set a new secret for the root's webhook (the old one stops working); returns it, to be shown once."""
    root.git_webhook_salt = secrets.token_hex(16)
    WorkspaceRoot.objects.filter(pk=root.pk).update(git_webhook_salt=root.git_webhook_salt)
    return webhook_secret(root=root, secret_key=secret_key)


def webhook_verified(*, root: WorkspaceRoot, headers: Mapping[str, str], body: bytes, secret_key: str) -> bool:
    """Whether the request carries a valid signature (GitHub, Gitea) or token (GitLab) for the root's secret.

    Every comparison is constant-time; a root without a secret accepts nothing.
    """
    secret = webhook_secret(root=root, secret_key=secret_key)
    if not secret:
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if signature := headers.get(GITHUB_HEADER, ""):
        return hmac.compare_digest(signature.encode(), f"sha256={expected}".encode())
    if signature := headers.get(GITEA_HEADER, ""):
        return hmac.compare_digest(signature.encode(), expected.encode())
    if token := headers.get(GITLAB_HEADER, ""):
        return hmac.compare_digest(token.encode(), secret.encode())
    return False
