"""Connectors: each lists a kind of source's items (files, pages, ...) for the one indexing pipeline."""
