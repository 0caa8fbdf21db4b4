import pytest

from retrieval.query_shape import QueryShape, name_words, query_shape

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("query", "shape"),
    [
        ("get_object_or_404", QueryShape.IDENTIFIER),
        ("ChangeList.get_filters", QueryShape.IDENTIFIER),
        ("HttpServerConfig", QueryShape.IDENTIFIER),
        ("get_filters()", QueryShape.IDENTIFIER),
        ("F", QueryShape.SYMBOL),
        ("pagination", QueryShape.SYMBOL),
        ("how does the admin build changelist filters", QueryShape.QUESTION),
        ('Traceback (most recent call last):\n  File "app.py", line 3, in <module>', QueryShape.TRACE),
        ("  at com.example.Main.run(Main.java:12)\n  at java.lang.Thread.run(Thread.java:1)", QueryShape.TRACE),
        (" ".join(["word"] * 31), QueryShape.LONG),
    ],
)
def test_a_query_is_told_by_its_shape(query, shape):
    assert query_shape(query) == shape


def test_name_words_are_whole_and_split():
    assert name_words("ChangeList.get_filters") == {"changelist", "change", "list", "get_filters", "get", "filters"}
