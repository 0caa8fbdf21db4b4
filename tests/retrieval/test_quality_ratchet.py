"""The quality ratchet: on a code-search set built here from the installed
`click` package, and on the developer questions about celery's code
(measure/questions/celery.jsonl, issue 42), the fused channel must not fall
below the best single one.

Measured 2026-11-23 (`make eval`): hit@5 vector 0.704, lexical (BM25) 0.658,
fused 0.734; MRR@10 vector 0.557, fused 0.572. A change that breaks fusion or
the lexical channel fails here, in CI, in about a minute.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import celery
import pytest
from django.db import connection

from measure.evaluation import code_evaluate, code_queries_load, code_root_index

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
GENERATOR = Path(__file__).resolve().parents[3] / "shared" / "eval" / "make_code_eval.py"
QUESTIONS = Path(__file__).resolve().parents[2] / "measure" / "questions" / "celery.jsonl"


@pytest.mark.skipif(not GENERATOR.exists(), reason="../shared/eval is not beside the checkout")
def test_fusion_beats_every_single_channel_on_click(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    subprocess.run([sys.executable, str(GENERATOR), "click", str(tmp_path)], check=True, capture_output=True)
    queries = code_queries_load(tmp_path / "queries.jsonl")
    root, _ = code_root_index(tmp_path / "src")
    report = code_evaluate(queries, root, k=10)
    best = {metric: max(report[channel][metric] for channel in ("lexical", "vector")) for metric in ("hit@5", "hit@10")}
    assert report["fused"]["hit@5"] >= best["hit@5"], report
    assert report["fused"]["hit@10"] >= best["hit@10"], report
    assert report["fused"]["mrr@10"] >= report["vector"]["mrr@10"], report
    assert report["lexical"]["hit@5"] > report["token-overlap"]["hit@5"], report


def test_fusion_beats_every_single_channel_on_the_celery_developer_questions(tmp_path, settings):
    # Measured 2026-11-28 (make eval): MRR@10 lexical 0.440, vector 0.472, fused 0.551 (0.490 before issue 42).
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    shutil.copytree(
        Path(celery.__file__).parent, tmp_path / "src" / "celery", ignore=shutil.ignore_patterns("__pycache__")
    )
    # Quality, not speed: a long question's lexical statement may take longer than the service's limit on a
    # machine running the suite beside it, and a skipped channel would measure something else.
    settings.RAG_SEARCH_STATEMENT_TIMEOUT_MS = 60_000
    queries = code_queries_load(QUESTIONS, root=tmp_path / "src")
    root, _ = code_root_index(tmp_path / "src")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # the test's rows are uncommitted: autovacuum has no statistics of them
    report = code_evaluate(queries, root, k=10)
    for metric in ("mrr@10", "hit@10"):
        assert report["fused"][metric] >= max(report["lexical"][metric], report["vector"][metric]), report
