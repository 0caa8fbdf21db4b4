"""What counts as a secret: names never indexed by default, and (from
``sources.secret_scan``) the content scan that keeps a file out of the index
when its text holds a credential.

Pure Python (no Django): the walker and the reader use it.
"""

from sources.secret_scan import secret_found

__all__ = ["DEFAULT_DENY", "secret_found"]

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
