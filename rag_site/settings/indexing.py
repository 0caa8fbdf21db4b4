"""Embedding, chunking and indexing: the models, the chunker, workspace roots and index jobs."""

from pathlib import Path

from rag_site.settings_registry import (
    read_bool,
    read_choice,
    read_float,
    read_int,
    read_list,
    read_pattern,
    read_str,
)

RAG_EMBEDDING_MODEL = read_str("RAG_EMBEDDING_MODEL")
# auto | cpu | cuda | cuda:N, resolved when a model loads (sources/embedding/device.py): torch is not imported here.
RAG_EMBEDDING_DEVICE = read_pattern("RAG_EMBEDDING_DEVICE")
# torch | onnx | onnx-int8 | auto (sources/embedding/backends.py, choice.py): part of a local model's identity,
# so a change re-embeds.
RAG_EMBEDDING_BACKEND = read_choice("RAG_EMBEDDING_BACKEND")
RAG_EMBED_BATCH_SIZE = read_int("RAG_EMBED_BATCH_SIZE")
# Intra-op threads of the local models per process; 0 = torch's default (one
# per core). Web processes default to 1 (rag_site/wsgi.py): measured 8x the
# vector searches per second at 16 clients on 2 cores. Read when a model loads.
RAG_TORCH_THREADS = read_int("RAG_TORCH_THREADS")
# Indexing collects this many chunks (across files) before embedding them in
# one call: sentence-transformers sorts a call's texts by length, so large
# calls pad less. Measured with `rag_bench index` (docs/configuration.md has the numbers).
RAG_INDEX_FLUSH_CHUNKS = read_int("RAG_INDEX_FLUSH_CHUNKS")
# A chunk longer than the model reads (256 word pieces for MiniLM): "pieces"
# embeds it in pieces and averages them, "truncate" lets the model drop the
# rest. Part of every document's fingerprint: a change re-embeds at the next index run.
# On code, 21% of click's chunks and 15% of jinja2's are that long (msmarco:
# none), yet `rag_eval --code` measured truncation best; vector hit@5/MRR@10:
#   truncate:    click 0.704 / 0.557, jinja2 0.723 / 0.538
#   pieces:      click 0.678 / 0.524, jinja2 0.689 / 0.507
#   900-char chunks (about 256 word pieces of code): click 0.709 / 0.544
#   (hit@10 0.824 against 0.799, but a lower MRR and 24% more chunks)
# A chunk's head (signature, heading, first lines) says most about it;
# averaging in the rest blurs that.
RAG_EMBED_LONG_TEXTS = read_choice("RAG_EMBED_LONG_TEXTS")
RAG_CHUNK_MAX_CHARS = read_int("RAG_CHUNK_MAX_CHARS")
RAG_CHUNK_OVERLAP = read_int("RAG_CHUNK_OVERLAP")
RAG_SKILL_REVERIFY_MINUTES = read_int("RAG_SKILL_REVERIFY_MINUTES")
RAG_MAX_SKILL_BYTES = read_int("RAG_MAX_SKILL_BYTES")
RAG_INDEX_RETRY_DELAY = read_float("RAG_INDEX_RETRY_DELAY")
# Documents (sources/extract/): each extraction runs in a child process under these limits, so a hostile
# or broken file fails alone. 48 MB of address space already read the test corpus; the default leaves room for
# real reports (peak RSS 67 MB on the corpus).
RAG_EXTRACT_TIMEOUT_SECONDS = read_float("RAG_EXTRACT_TIMEOUT_SECONDS")
RAG_EXTRACT_MAX_MEMORY_MB = read_int("RAG_EXTRACT_MAX_MEMORY_MB")
RAG_EXTRACT_MAX_PAGES = read_int("RAG_EXTRACT_MAX_PAGES")
RAG_EXTRACT_MAX_FILE_MB = read_int("RAG_EXTRACT_MAX_FILE_MB")
# Memories bots write (sources/memories.py): on, a new one is not searched or recalled until an admin approves it.
RAG_MEMORY_REQUIRE_APPROVAL = read_bool("RAG_MEMORY_REQUIRE_APPROVAL")

# --- Workspace roots and index jobs -----------------------------------------
# Roots may only be registered under these directories (admin and API refuse
# others); by default, the directory this checkout sits in.
RAG_ROOT_BASE_DIRS = [str(Path(p).resolve()) for p in read_list("RAG_ROOT_BASE_DIRS")]
# A job whose worker died is taken over at once (no session holds its root's
# advisory lock, sources/locks.py). One whose worker holds the lock but made
# no progress for this long hangs: its session is ended and the job taken
# over, up to RAG_JOB_MAX_ATTEMPTS; indexing is idempotent, so the new attempt
# resumes where the old one stopped.
RAG_JOB_STALE_SECONDS = read_int("RAG_JOB_STALE_SECONDS")
# A git root's clone, fetch or checkout that takes longer fails its job (sources/git.py).
RAG_GIT_TIMEOUT_SECONDS = read_int("RAG_GIT_TIMEOUT_SECONDS")
# Git credentials are bound by the operator, each to a host (sources/git_credentials.py); a root names one.
RAG_GIT_CREDENTIALS_DIR = read_str("RAG_GIT_CREDENTIALS_DIR")
RAG_GIT_ALLOW_HTTP = read_bool("RAG_GIT_ALLOW_HTTP")
RAG_JOB_MAX_ATTEMPTS = read_int("RAG_JOB_MAX_ATTEMPTS")
# Web roots (sources/connectors/web/): what one crawl may reach and take. Private addresses are refused unless
# allowed, so a start URL an admin types cannot make the server fetch its own internal services.
RAG_WEB_ALLOW_PRIVATE = read_bool("RAG_WEB_ALLOW_PRIVATE")
RAG_WEB_MAX_PAGES = read_int("RAG_WEB_MAX_PAGES")
RAG_WEB_MAX_PAGE_MB = read_int("RAG_WEB_MAX_PAGE_MB")
RAG_WEB_MAX_CRAWL_MB = read_int("RAG_WEB_MAX_CRAWL_MB")
RAG_WEB_MAX_CRAWL_SECONDS = read_int("RAG_WEB_MAX_CRAWL_SECONDS")
