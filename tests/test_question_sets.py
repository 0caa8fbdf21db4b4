"""The developer-question sets of ``make eval`` (measure/questions/): each question points at a definition that is
there, and a set written for one version of a package follows its code to the next."""

import importlib.metadata
import json
from pathlib import Path

import pytest

from kernel.errors import ApplicationError
from measure.evaluation import code_queries_load, symbol_lines

pytestmark = pytest.mark.unit
QUESTIONS = Path(__file__).resolve().parents[1] / "measure" / "questions"
SITE = Path(pytest.__file__).resolve().parents[1]  # site-packages: the packages the questions were written on


# The versions the questions were written on: their lines are exact there; a later release may move the code
# (rag_eval follows the symbol) but must still define it.
WRITTEN_ON = {"celery": "5.7.0", "django": "5.2.19"}


@pytest.mark.parametrize("name", sorted(WRITTEN_ON))
def test_every_question_names_a_definition_of_the_installed_package(name):
    rows = [json.loads(line) for line in (QUESTIONS / f"{name}.jsonl").read_text().splitlines() if line.strip()]
    assert len(rows) >= 40
    assert len({row["_id"] for row in rows}) == len(rows)
    exact = importlib.metadata.version(name) == WRITTEN_ON[name]
    for row in rows:
        found = symbol_lines(SITE / row["path"], row["symbol"])
        assert found == [(row["start_line"], row["end_line"])] if exact else len(found) == 1, row


SOURCE = """\
import functools


class Pool:
    @functools.cache
    def grow(self, n):
        return n + 1


class Heap:
    def grow(self):
        pass
"""


def queries(tmp_path, symbol: str) -> Path:
    path = tmp_path / "questions.jsonl"
    row = {"_id": "q1", "text": "how does the pool grow", "path": "pkg/pool.py", "start_line": 1, "end_line": 2}
    path.write_text(json.dumps({**row, "symbol": symbol}) + "\n")
    return path


def test_a_question_takes_its_symbols_lines_from_the_code_it_is_asked_of(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "pool.py").write_text(SOURCE)
    [query] = code_queries_load(queries(tmp_path, "Pool.grow"), root=tmp_path / "src")
    assert (query.start_line, query.end_line) == (5, 7)  # the decorator's line first
    [as_written] = code_queries_load(queries(tmp_path, "Pool.grow"))
    assert (as_written.start_line, as_written.end_line) == (1, 2)


def test_a_bare_name_is_the_definition_nearest_the_querys_lines(tmp_path):
    # make_code_eval.py names a method by its name alone.
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "pool.py").write_text(SOURCE)
    [query] = code_queries_load(queries(tmp_path, "grow"), root=tmp_path / "src")
    assert (query.start_line, query.end_line) == (5, 7)
    assert symbol_lines(tmp_path / "src" / "pkg" / "pool.py", "grow") == [(5, 7), (11, 12)]


def test_a_symbol_the_code_lacks_is_a_clear_error(tmp_path):
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "pool.py").write_text(SOURCE)
    with pytest.raises(ApplicationError, match="Pool.shrink is not defined in .*pool.py"):
        code_queries_load(queries(tmp_path, "Pool.shrink"), root=tmp_path / "src")
