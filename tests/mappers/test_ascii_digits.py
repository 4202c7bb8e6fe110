"""Digits are ASCII digits: other scripts' digits ("٣", "²"), underscores and spaces, which Python's int() and
Decimal() take (or take in part), are no DynamoDB number and no integer to a transform, so a value holding them
is refused as such, never read as another number's text and never a crash."""

from __future__ import annotations

import pytest

from ddb2bt.mappers.attrvalue import number_text, value_problem
from ddb2bt.mappers.encodings import ENCODERS, EncodingError
from ddb2bt.mappers.numbers import DecimalError, parse_number
from ddb2bt.mappers.timestamps import TimestampError, parse_timestamp
from ddb2bt.mappers.transforms import TransformError, pad, reverse_timestamp, unshard

NOT_NUMBERS = ["٣", "²", "١٢", "1_000", " 1", "1 ", "1\n", "٣.5", "1e٣", "+", ".", "e5", ""]


@pytest.mark.parametrize("text", NOT_NUMBERS)
def test_text_decimal_takes_but_dynamodb_refuses_is_no_number(text):
    with pytest.raises(DecimalError):
        parse_number(text)
    with pytest.raises(DecimalError):
        number_text(text)
    assert value_problem({"N": text}, "Item.n") is not None


@pytest.mark.parametrize("text", ["0", "-0", "+3", "3.", ".5", "1E+125", "-1e-130", "9" * 38])
def test_what_dynamodb_takes_is_still_a_number(text):
    parse_number(text)


@pytest.mark.parametrize("encoding", ["int64", "decimal"])
@pytest.mark.parametrize("text", ["٣", "²", "١٢٣"])
def test_encoders_refuse_other_digits(encoding, text):
    with pytest.raises((EncodingError, DecimalError)):
        ENCODERS[encoding]({"N": text})


@pytest.mark.parametrize("transform", [lambda v: pad(v, 5), reverse_timestamp, lambda v: unshard("day." + v)])
@pytest.mark.parametrize("text", ["٣", "²", "١٢٣"])
def test_integer_transforms_refuse_other_digits(transform, text):
    with pytest.raises(TransformError):
        transform(text)


@pytest.mark.parametrize("text", ["²²²²²²²²²²", "١٧٠٠٠٠٠٠٠٠"])
def test_a_timestamp_of_other_digits_is_refused_not_a_crash(text):
    with pytest.raises(TimestampError, match="is not an ISO-8601 time"):  # the crash was a bare ValueError
        parse_timestamp(text)
