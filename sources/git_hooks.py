"""A git root's webhook secret and the check of a push event's signature (GitHub, Gitea, GitLab).

The secret is never stored: it is derived from SECRET_KEY and the root's
random salt (``git_webhook_salt``), so neither a database dump nor the admin
can give it back, and a new salt (rotate) revokes the old one at once.
Changing SECRET_KEY changes every root's webhook secret too.

A verified delivery is remembered for a window (``webhook_delivery_first``):
a replay of it (the same signed body, or the same delivery id) is answered
without a job.
"""

import hashlib
import hmac
import logging
import secrets
from collections.abc import Mapping

import redis

from kernel.config import redis_config
from kernel.redis import redis_client
from sources.models import WorkspaceRoot

log = logging.getLogger(__name__)

GITHUB_HEADER = "X-Hub-Signature-256"  # "sha256=" + hex HMAC-SHA256 of the body
GITEA_HEADER = "X-Gitea-Signature"  # hex HMAC-SHA256 of the body
GITLAB_HEADER = "X-Gitlab-Token"  # the shared secret itself
# Each host's id of one delivery (GitHub, Gitea, GitLab): the same on the host's own redelivery of it.
DELIVERY_HEADERS = ("X-GitHub-Delivery", "X-Gitea-Delivery", "X-Gitlab-Event-UUID")
# How long a delivery is remembered. A replay later than this queues one fetch job, which finds no new commit and
# ends at once: the window only has to make replaying in bulk pointless. A week of pushes is a few keys of ~100 bytes.
REPLAY_WINDOW_SECONDS = 7 * 24 * 3600


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


def webhook_delivery_first(*, root: WorkspaceRoot, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a verified delivery is seen for the first time in the window (False: a replay, to queue nothing).

    The delivery id header is not signed, so a replayer may change it: the body,
    which is signed, is remembered too (its SHA-256), and a delivery whose body
    or id was seen is a replay. A delivery without an id is judged by its body
    alone; a host's push bodies differ (each names its new commit). When Redis
    cannot be reached the delivery counts as new: a fetch job is safe to repeat,
    a lost push is not.
    """
    prefix = f"rag:hook:{root.pk}:"
    keys = [prefix + "body:" + hashlib.sha256(body).hexdigest()]
    if delivery := next((value for name in DELIVERY_HEADERS if (value := headers.get(name, ""))), ""):
        keys.append(prefix + "id:" + hashlib.sha256(delivery.encode()).hexdigest())
    try:
        with redis_client(redis_config()).pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.set(key, 1, nx=True, ex=REPLAY_WINDOW_SECONDS)
            first = pipe.execute()
    except redis.RedisError as exc:
        log.warning("webhook of root %s: replay not checked (Redis unreachable): %s", root.pk, exc)
        return True
    return all(first)
