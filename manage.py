#!/usr/bin/env python
"""Django's command-line utility for rag-site."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rag_site.settings")
    # Without DATABASE_URL / REDIS_URL the embedded services are started (or
    # joined) before settings are read, so every command works unconfigured.
    from rag_site.embedded import services_prepare

    services_prepare(command=sys.argv[1] if len(sys.argv) > 1 else "")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
