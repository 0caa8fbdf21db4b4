import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from sources.models import Source

pytestmark = pytest.mark.django_db

CORPUS = [
    {"_id": "d1", "title": "Backups", "text": "Run pg_dump every night to back up the PostgreSQL database."},
    {"_id": "d2", "title": "Deploy", "text": "Ship the containers with docker compose up."},
    {"_id": "d3", "title": "Cooking", "text": "Boil pasta in salted water for nine minutes."},
    {"_id": "d4", "title": "", "text": "Rotate the TLS certificates before they expire\u2028every sixty days."},
]
QUERIES = [
    {"_id": "q1", "text": "how to back up postgres"},
    {"_id": "q2", "text": "renew certificates"},
    {"_id": "q3", "text": "an unjudged query"},
]
QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\td4\t1\n"


@pytest.fixture
def dataset(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps(row) for row in CORPUS) + "\n")
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps(row) for row in QUERIES) + "\n")
    (tmp_path / "qrels" / "test.tsv").write_text(QRELS)
    return tmp_path


def run(*args) -> dict:
    out = StringIO()
    call_command("rag_eval", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


# Every run's rows: the channels, both fusions, MMR, and the rows without vector feedback.
CHANNELS = {
    "token-overlap",
    "lexical",
    "vector",
    "fused",
    "fused-1w",
    "fused+mmr",
    "vector-nofb",
    "fused-nofb",
    "fused-nolexfb",
}


def test_every_channel_is_scored_from_one_run(dataset):
    report = run(str(dataset))
    assert (report["documents"], report["queries"], report["embedded_chunks"]) == (4, 2, 4)
    assert set(report["channels"]) == CHANNELS
    assert report["channels"]["vector"]["mrr@10"] == 1.0  # both answers ranked first
    assert set(report["channels"]["fused"]) == {"ndcg@10", "recall@10", "recall@100", "mrr@10"}
    # The context metric: four short passages all fit in 1k tokens, so every judged one is inside.
    context = report["context"]
    assert {f"{m}@{b}k" for m in ("context", "best", "recall") for b in (1, 2, 4)} <= set(context)
    assert context["context@1k"] == context["best@1k"] == context["recall@4k"] == 1.0
    assert {"tokens/cl100k_base", "tokens/llama3", "tokens/qwen3"} <= set(context)
    assert all(0.5 < context[name] < 2.0 for name in context if name.startswith("tokens/"))
    # The context's relevance floor side by side: without one, every query's context holds evidence, noise included.
    floors = context["by_floor"]
    assert context["floor"] == 0.3 and {"-1", "0.3", "0.4"} <= set(floors)
    assert floors["-1"]["empty"] == 0.0 and floors["-1"]["gibberish_empty"] == 0.0
    assert floors["0.3"]["context@1k"] == 1.0 and floors["0.3"]["gibberish_empty"] > 0.5
    assert not Source.objects.filter(kind="dataset").exists()  # removed without --keep
    assert report["searches_skipping_work"] == []  # every search did all its work: these are the service's numbers
    # Both real queries share words with the corpus: never "no good match". Most of the gibberish is called so.
    confidence = report["no_good_match"]
    assert confidence["floor"] == 0.4 and confidence["real_flagged"] == 0.0
    assert confidence["gibberish_flagged"] >= 0.9 and set(confidence["by_floor"]) == {
        "0.3",
        "0.35",
        "0.4",
        "0.45",
        "0.5",
    }


def test_a_run_whose_searches_skip_work_says_its_numbers_are_not_the_services(dataset):
    """The report path: a search's warning (here as a timed-out channel words it) reaches whoever runs the eval."""
    from measure import evaluation

    out, err = StringIO(), StringIO()
    evaluation._skipped.append("vector skipped: it took longer than RAG_SEARCH_STATEMENT_TIMEOUT_MS (1500 ms)")
    call_command("rag_eval", str(dataset), stdout=out, stderr=err)
    assert "warning: 1 searches of this run skipped part of their work" in err.getvalue()


def test_a_configured_rerank_model_gets_its_own_row(dataset, settings, tiny_model):
    settings.RAG_RERANK_MODEL = tiny_model
    settings.RAG_RERANK_MIN_CHARS = 0
    channels = run(str(dataset))["channels"]
    assert set(channels) == CHANNELS | {"fused+rerank"}
    # An untrained model reorders, but every judged document is still in the reranked head.
    assert channels["fused+rerank"]["recall@10"] == channels["fused"]["recall@10"] == 1.0


def test_contextual_retrieval_and_the_llm_reranker_get_their_rows_when_configured(dataset, settings, openai_server):
    from kernel.llm import process_breaker

    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = openai_server.base_url, "eval-llm"
    settings.RAG_CONTEXTUAL_RETRIEVAL, settings.RAG_CONTEXTUAL_MODEL = True, "eval-llm"
    settings.RAG_RERANK_BACKEND, settings.RAG_RERANK_MIN_CHARS = "llm", 0
    process_breaker().close("eval-llm")

    def answer(model: str, body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        return '{"ranking": [1]}' if "Passages:" in prompt else "A passage about operations work."

    openai_server.on_chat(answer)
    out = StringIO()
    call_command("rag_eval", str(dataset), stdout=out)
    text = out.getvalue()
    assert "(contextual retrieval on: every chunk described by " in text and "fused+llm-rerank" in text
    channels = run(str(dataset))["channels"]
    assert "fused+llm-rerank" in channels and "fused+rerank" not in channels  # no cross-encoder is configured
    assert channels["fused+llm-rerank"]["recall@10"] <= channels["fused"]["recall@10"]  # it keeps one passage per query


def test_a_kept_dataset_embeds_nothing_on_a_rerun_and_stays_out_of_real_searches(dataset, key_client):
    assert run(str(dataset), "--keep")["embedded_chunks"] == 4
    assert run(str(dataset), "--keep")["embedded_chunks"] == 0
    hits = key_client.post(
        "/api/v1/search", data=json.dumps({"query": "pg_dump postgres backup"}), content_type="application/json"
    )
    assert hits.json()["hits"] == []


def test_a_directory_that_is_not_beir_is_a_clear_error(tmp_path):
    with pytest.raises(CommandError, match="not a BEIR dataset: missing"):
        run(str(tmp_path))


def test_code_mode_scores_hits_by_file_and_overlapping_lines(tmp_path, settings):
    settings.RAG_ROOT_BASE_DIRS = [str(tmp_path)]
    src = tmp_path / "src" / "pkg"
    src.mkdir(parents=True)
    (src / "money.py").write_text(
        "import decimal\n\n\ndef convert_currency(amount, rate):\n    return amount * rate\n\n\n"
        "def round_cents(value):\n    return round(value, 2)\n"
    )
    (src / "text.py").write_text("def slugify(title):\n    return title.lower().replace(' ', '-')\n")
    queries = tmp_path / "queries.jsonl"
    queries.write_text(
        json.dumps(
            {
                "_id": "q0",
                "text": "Convert an amount of money with an exchange rate.",
                "path": "pkg/money.py",
                "start_line": 4,
                "end_line": 5,
            }
        )
        + "\n"
        + json.dumps(
            {
                "_id": "q1",
                "text": "Make a URL slug out of a page title.",
                "path": "pkg/text.py",
                "start_line": 1,
                "end_line": 2,
            }
        )
        + "\n"
    )
    report = run("--code", str(queries), "--root", str(tmp_path / "src"))
    assert (report["files"], report["queries"]) == (2, 2)
    assert report["channels"]["vector"]["hit@1"] == 1.0
    assert set(report["channels"]["fused"]) == {"hit@1", "hit@5", "hit@10", "mrr@10"}
    assert report["context"]["context@1k"] == 1.0  # both functions fit in 1k tokens
    first, again = (
        run("--code", str(queries), "--root", str(tmp_path / "src"), "--keep")["embedded_chunks"] for _ in range(2)
    )
    assert first > 0 and again == 0  # a kept root is re-verified on the next run, not re-embedded
    with pytest.raises(CommandError, match="--code needs --root"):
        run("--code", str(queries))


def test_with_a_chat_model_the_eval_scores_cited_answers(dataset, settings, openai_server):
    from kernel.llm import process_breaker

    settings.RAG_LLM_BASE_URL, settings.RAG_LLM_MODEL = openai_server.base_url, "eval-writer"
    process_breaker().close("eval-writer")

    def reply(model: str, body: dict) -> str:
        prompt = body["messages"][-1]["content"]
        if "Answer to check:" in prompt:
            return 'Judged: {"faithfulness": 0.75}'
        given = len(re.findall(r"^\[(\d+)\] ", prompt, flags=re.MULTILINE))
        return "Here is what the sources say " + "".join(f"[{n}]" for n in range(1, given + 2)) + "."

    openai_server.on_chat(reply)
    answers = run(str(dataset))["answers"]
    prompts = [
        c.body["messages"][-1]["content"]
        for c in openai_server.requests(model="eval-writer")
        if "Answer to check:" not in c.body["messages"][-1]["content"]
    ]
    given = [re.findall(r"^\[\d+\] (d\d):", prompt, flags=re.MULTILINE) for prompt in prompts]
    relevant = {"how to back up postgres": "d1", "renew certificates": "d4"}
    expected = sum(relevant[p.rsplit("Question: ", 1)[1]] in docs for p, docs in zip(prompts, given, strict=True))
    # Each answer cites every source it was given (and one number past them, dropped); one passage a query is relevant.
    assert (answers["answered"], answers["failed"]) == (2, 0)
    assert answers["citations"] == sum(len(docs) for docs in given) > 0
    assert answers["citation_precision"] == expected / answers["citations"] > 0
    assert answers["faithfulness"] == 0.75 and answers["faithfulness_judged"] == 2
    assert answers["dropped_markers"] == 2
    assert "answers" not in run(str(dataset), "--answers", "0")
    out = StringIO()
    call_command("rag_eval", str(dataset), stdout=out)
    assert "cited answers (eval-writer) to 2 queries" in out.getvalue() and "faithfulness 0.750" in out.getvalue()
