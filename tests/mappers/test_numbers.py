"""Exact DynamoDB numbers and the order-preserving key encoding."""

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddb2bt.mappers.numbers import DecimalError, canonical_text, from_sortable_text, parse_number, sortable_text


def dynamodb_numbers():
    """Any number DynamoDB accepts: up to 38 significant digits, exponent within -130..125."""
    digits = st.integers(min_value=1, max_value=10**38 - 1)
    return st.one_of(
        st.just(Decimal(0)),
        st.builds(
            lambda sign, mantissa, exponent: Decimal((sign, tuple(int(d) for d in str(mantissa)), exponent)),
            st.sampled_from([0, 1]),
            digits,
            st.integers(min_value=-130, max_value=88),
        ).filter(lambda number: -130 <= number.adjusted() <= 125),
    )


@settings(max_examples=400)
@given(st.lists(dynamodb_numbers(), min_size=2, max_size=20))
def test_sortable_text_sorts_exactly_like_the_numbers(numbers):
    encoded = sorted(numbers, key=lambda number: sortable_text(str(number)))
    assert encoded == sorted(numbers)


@settings(max_examples=400)
@given(dynamodb_numbers())
def test_sortable_text_round_trips(number):
    assert from_sortable_text(sortable_text(str(number))) == number


@pytest.mark.parametrize(
    "smaller, larger",
    [
        ("-1.23", "-1.2"),
        ("-1", "-0.5"),
        ("-0.5", "0"),
        ("0", "1E-130"),
        ("3", "20"),
        ("1.2", "1.23"),
        ("99999999999999999999999999999999999999", "1E+38"),
        ("-99999999999999999999999999999999999999E+88", "-1E+125"),
        ("12345678901234567890123456789012345678", "12345678901234567890123456789012345679"),
    ],
)
def test_known_orderings(smaller, larger):
    assert sortable_text(smaller) < sortable_text(larger)


def test_sortable_text_is_readable_text():
    assert sortable_text("30") == "21313"  # 3 x 10**1: sign 2, exponent 1+130, digits 3
    assert sortable_text("0") == "1"


@pytest.mark.parametrize("bad", ["abc", "NaN", "Infinity", "1E+126", "1E-131", "1234567890123456789012345678901234567891"])
def test_rejects_what_dynamodb_rejects(bad):
    with pytest.raises(DecimalError):
        parse_number(bad)


@pytest.mark.parametrize("text, canonical", [("30.0", "30"), ("1E+2", "100"), ("0.10", "0.1"), ("-0", "0"), ("1.5E-3", "0.0015")])
def test_canonical_text(text, canonical):
    assert canonical_text(parse_number(text)) == canonical
