"""What counts as a secret: names never indexed by default, and key shapes
that keep a file out of the index when its text contains one.

Pure Python (no Django): the walker and the reader use it.
"""

import re

# .gitignore syntax, matched case-insensitively against the path below the
# root; a pattern matches files and directories, a trailing "/" directories
# only. Broad where a name exists to hold secrets (".env*", "*secret*",
# "*credential*"); narrow where a broader pattern would hide ordinary code:
# "id_rsa*" and friends rather than "id_*" (id_utils.py is code), and
# "settings.ini" (python-decouple reads it like a .env) but not "*.ini" or
# settings.py (Django settings are code people search; keys inside them are
# what the content scan is for).
DEFAULT_DENY = (
    ".env* *.pem *.key *.p12 *.pfx *.ppk *.jks *.keystore *.kdbx *.tfstate *.tfstate.* "
    "id_rsa* id_dsa* id_ecdsa* id_ed25519* "
    ".aws/ .ssh/ .gnupg/ .kube/ **/.docker/config.json .npmrc .pypirc .netrc .pgpass .htpasswd .vault-token "
    "*secret* *credential* settings.ini"
)

# (label, literals one of which every match contains, pattern). A regex runs
# only over a text holding one of its literals: ``in`` is many times faster
# than a regex search, and most files hold none.
_SHAPES = [
    ("private key header", ("PRIVATE KEY",), r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"),
    # AKIAIOSFODNN7EXAMPLE is AWS's documented placeholder, quoted by many docs and tests.
    ("AWS access key id", ("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)(?![0-9A-Z]{9}EXAMPLE\b)[0-9A-Z]{16}\b"),
    ("GitHub token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
     r"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{60,})\b"),
    ("Slack token", ("xox",), r"\bxox[baprs]-[A-Za-z0-9-]{10,}"),
    ("API key sk-...", ("sk-",), r"\bsk-(?:(?:proj|ant|svcacct|admin)-[A-Za-z0-9_-]{20,}|[A-Za-z0-9]{32,})"),
    ("Stripe live key", ("k_live_",), r"\b[rs]k_live_[A-Za-z0-9]{20,}"),
    ("Google API key", ("AIza",), r"\bAIza[0-9A-Za-z_-]{35}"),
]
_COMPILED = [(label, literals, re.compile(pattern)) for label, literals, pattern in _SHAPES]


def secret_found(text: str) -> str | None:
    """What kind of key or token the text contains, or None."""
    for label, literals, pattern in _COMPILED:
        if any(literal in text for literal in literals) and pattern.search(text):
            return label
    return None
