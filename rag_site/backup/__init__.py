"""Backup and restore of the whole database: pg_dump's custom format beside a manifest that says what it holds.

PostgreSQL holds everything rag-site knows (sources, chunks, vectors,
postings, keys, grants, people, schedules), so one consistent dump is a whole
backup; uploaded documents' original files are copied beside it (their text is
in the dump, the originals serve downloads). ``rag_backup`` / ``rag_restore``
and the scheduled task are thin edges over services.py.
"""
