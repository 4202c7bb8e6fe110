"""Row keys and qualifiers are injective: distinct attribute tuples never give the same bytes (issue 10, item 1)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ddb2bt.mappers.render import ItemFailure, compile_template, unescape_delimiter
from ddb2bt.mappers.spec import Template

# Text rich in the characters that matter: the delimiters, `%`, escapes that look real, and empty strings.
PIECES = st.sampled_from(["#", "%", "2", "3", "5", "a", "é", ":", "→", "/", "%23", "%25", "%3A"])
TRICKY = st.lists(PIECES, max_size=5).map("".join) | st.text(max_size=5)
DELIMITERS = st.sampled_from(["#", ":", "/", "::", "→"])


def render(template: str, delimiter: str, values: tuple[str, ...], on_delimiter: str = "escape") -> str | None:
    spec = Template(template=template, delimiter=delimiter, on_delimiter=on_delimiter)
    item = {name: {"S": value} for name, value in zip("abc", values)}
    try:
        return compile_template(spec)(item)
    except ItemFailure:
        return None


def three_part(delimiter: str) -> str:
    return delimiter.join("{%s}" % name for name in "abc")


@given(DELIMITERS, st.tuples(TRICKY, TRICKY, TRICKY), st.tuples(TRICKY, TRICKY, TRICKY))
def test_escape_keys_are_injective(delimiter, first, second):
    template = three_part(delimiter)
    if first != second:
        assert render(template, delimiter, first) != render(template, delimiter, second)


@given(DELIMITERS, st.tuples(TRICKY, TRICKY, TRICKY))
def test_escaped_key_splits_back_into_its_values(delimiter, values):
    key = render(three_part(delimiter), delimiter, values)
    *leading, last = key.split(delimiter, 2)
    assert tuple(unescape_delimiter(part, delimiter) for part in leading) + (last,) == values


@given(DELIMITERS, st.tuples(TRICKY, TRICKY), st.tuples(TRICKY, TRICKY))
def test_error_mode_keys_are_injective_where_they_render(delimiter, first, second):
    template = f"x{delimiter}{{a}}{delimiter}{{b}}"
    one, two = render(template, delimiter, first, "error"), render(template, delimiter, second, "error")
    if one is not None:
        assert not set(delimiter) & set(first[0]), "a leading value with a delimiter character must be refused"
        if first != second:
            assert one != two


def test_issue_example_two_items_two_rows():
    template = "{a}#{b}"
    assert render(template, "#", ("Q#R", "Z")) == "Q%23R#Z"
    assert render(template, "#", ("Q%23R", "Z")) == "Q%2523R#Z"
    assert render(template, "#", ("100%", "Z")) == "100%25#Z"  # `%` is escaped even without a delimiter
