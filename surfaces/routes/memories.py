"""Memories over the API: a bot remembers a fact, lists, reads, changes and forgets what it may.

A key or a signed-in person; anonymous callers are refused (401). The
answers (retrieval/memories.py) are shared with the MCP tools; only HTTP is
here. A memory outside the caller's scope answers 404, as a missing one.
"""

from ninja import Query, Router
from ninja.decorators import decorate_view
from ninja.responses import Status

from access.auth import MANAGE_AUTH
from retrieval.config import SearchConfig
from retrieval.memories import (
    memories_list,
    memories_recall,
    memory_detail,
    memory_forget,
    memory_remember,
    memory_update,
)
from retrieval.memory_schemas import (
    MemoryIn,
    MemoryListIn,
    MemoryListOut,
    MemoryOut,
    MemoryPatchIn,
    RecallIn,
    RecallOut,
)
from retrieval.schemas import API_ERRORS, ErrorOut
from sources.config import memory_approval_required
from surfaces.middleware import read_only

# Keys and sessions, as for managing endpoints, but without a right: a bot writes its own memories (a shared one
# takes Right.WRITE_SHARED: access.memories).
router = Router(tags=["memories"], auth=MANAGE_AUTH)
ERRORS = {**API_ERRORS, 404: ErrorOut, 409: ErrorOut}


@router.post("/memories", response={201: MemoryOut, **ERRORS})
def memory_create(request, payload: MemoryIn):
    """Remember a fact (201), in the caller's scope unless a narrower one is asked for. It is indexed on the
    interactive queue within seconds (``index_status`` says where it is); with RAG_MEMORY_REQUIRE_APPROVAL it
    waits ``pending`` until an admin approves it. ``supersedes`` replaces an older memory: that one is kept,
    marked superseded, and no longer served."""
    return Status(201, memory_remember(request.auth, payload, approval_required=memory_approval_required()))


@router.get("/memories", response={200: MemoryListOut, **ERRORS})
def memory_list(request, query: Query[MemoryListIn]):
    """The memories the caller may read, newest first: active ones unless ``status`` asks for others."""
    return memories_list(request.auth, query)


@router.post("/memories/recall", response={200: RecallOut, **ERRORS})
@decorate_view(read_only)
def memory_recall(request, payload: RecallIn):
    """The active memories closest to ``query`` (the same hybrid search as /search, over memories only)."""
    return memories_recall(request.auth, payload, config=SearchConfig.from_settings())


@router.get("/memories/{memory_id}", response={200: MemoryOut, **ERRORS})
def memory_get(request, memory_id: int):
    """One memory in any state (follow ``supersedes`` and ``superseded_by`` through its history)."""
    return memory_detail(request.auth, memory_id)


@router.patch("/memories/{memory_id}", response={200: MemoryOut, 201: MemoryOut, **ERRORS})
def memory_patch(request, memory_id: int, payload: MemoryPatchIn):
    """Change a memory the caller may write. A new ``text`` creates a new version that supersedes this one (201,
    the new memory); other fields change in place (200). A superseded memory cannot be changed (409)."""
    out, created = memory_update(request.auth, memory_id, payload, approval_required=memory_approval_required())
    return Status(201 if created else 200, out)


@router.delete("/memories/{memory_id}", response={204: None, **ERRORS})
def memory_delete(request, memory_id: int):
    """Forget a memory the caller may write: the row, its chunk and its source go. Shared memories a key of one
    bot may read but not change answer 403."""
    memory_forget(request.auth, memory_id)
    return Status(204, None)
