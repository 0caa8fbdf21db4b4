"""The free-text ``query`` field keeps the limit its published schema states (found by tests/test_api_fuzz.py)."""

import pytest
from pydantic import ValidationError

from retrieval.schemas import SearchIn


@pytest.mark.unit
def test_a_query_longer_than_the_schema_allows_is_refused_even_when_trimming_would_shorten_it():
    # The schema says maxLength 2000; a tab and 2000 characters is 2001, although trimmed it is 2000.
    with pytest.raises(ValidationError, match="at most 2000 characters"):
        SearchIn.model_validate({"query": "\t" + "*" * 2000})


@pytest.mark.unit
def test_a_query_within_the_limit_is_trimmed():
    assert SearchIn.model_validate({"query": "  deploy  "}).query == "deploy"
    assert SearchIn.model_validate({"query": "*" * 2000}).query == "*" * 2000
