"""BM25's statistics are the caller's: N, the average length and each word's document frequency.

Issue 22, finding 7: N counted every tenant's chunks, so a bot's scores
drifted while another bot's root indexed (12.266 -> 12.412 -> 12.509), which
told it how much the other bot holds. Scores must depend on what the caller
may see and nothing else.
"""

import pytest

from access.scope import Scope
from retrieval.lexical import lexical_candidates
from retrieval.search import Mode, chunks_search
from sources import services
from sources.models import Chunk, Source
from tests.factories import SkillFactory

pytestmark = pytest.mark.django_db

ALPHA = Scope(bot_ids=("alpha",))
QUERY = "rotate the glacier backups"


def skill(slug: str, body: str, *, bot_id: str = "") -> None:
    services.skill_index(skill_id=SkillFactory(slug=slug, body=body, bot_id=bot_id).pk)


def root_files(key: str, bot_id: str, texts: list[str]) -> None:
    """A root's file chunks, as an index job stores them (the triggers keep the postings and statistics)."""
    source = Source.objects.create(kind=Source.Kind.FILE, key=key, title=key, bot_id=bot_id)
    Chunk.objects.bulk_create(
        [
            Chunk(
                source=source,
                path=f"docs/{n}.md",
                chunk_index=0,
                content=text,
                start_line=1,
                end_line=1,
                content_hash=str(n),
                chunking_version="test",
            )
            for n, text in enumerate(texts)
        ]
    )


def alpha_scores() -> tuple[dict[int, float], dict[int, float]]:
    """Alpha's BM25 scores for QUERY: from the channel alone, and as a lexical search reports them."""
    channel = {c.chunk_id: c.score for c in lexical_candidates(query=QUERY, scope=ALPHA, limit=20)}
    searched = {
        hit.chunk.pk: hit.channels["lexical"].score
        for hit in chunks_search(query=QUERY, mode=Mode.LEXICAL, scope=ALPHA, k=20)
    }
    return channel, searched


def test_a_bots_scores_do_not_move_while_another_bots_root_indexes():
    skill("alpha-backups", "# Backups\n\nRotate the glacier backups every night.\n", bot_id="alpha")
    skill("alpha-deploy", "# Deploy\n\nShip the containers, then check the backups.\n", bot_id="alpha")
    skill("shared-notes", "# Notes\n\nGlacier storage is cheap and slow.\n")
    before = alpha_scores()
    assert before[0] and before[0] == before[1]

    # Beta's root indexes in two batches, and beta saves skills: none of it is alpha's to see.
    root_files("beta-root", "beta", [f"Unrelated page {n} about cooking and travel." for n in range(40)])
    assert alpha_scores() == before
    root_files("beta-root-2", "beta", [f"Backups of page {n}, rotated weekly." for n in range(40)])
    skill("beta-glacier", "# Glacier\n\nGlacier glacier backups.\n", bot_id="beta")
    assert alpha_scores() == before


def test_a_shared_source_moves_every_callers_scores_alike():
    # What a caller can see is part of its statistics: a new shared source is.
    skill("alpha-backups", "# Backups\n\nRotate the glacier backups every night.\n", bot_id="alpha")
    skill("shared-notes", "# Notes\n\nGlacier storage is cheap and slow.\n")
    before = alpha_scores()[0]
    root_files("shared-root", "", [f"Unrelated page {n} about cooking and travel." for n in range(40)])
    after = alpha_scores()[0]
    assert set(after) == set(before) and all(after[chunk_id] > before[chunk_id] for chunk_id in before)
