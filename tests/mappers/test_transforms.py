"""Key transforms: each one, and the values each refuses."""

from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ddb2bt.mappers import transforms as t
from ddb2bt.mappers.templates import TemplateError, parse_template

CASES = [
    (t.part, ("a#b#c", 1), "b"),
    (t.part, ("a#b#c", -1), "c"),
    (t.part, ("a:b", 0, ":"), "a"),
    (t.strip_prefix, ("Payment-0680", "Payment-"), "0680"),
    (t.strip_suffix, ("file.json", ".json"), "file"),
    (t.pad, ("3", 4), "0003"),
    (t.sortable_number, ("-1.5",), "012584~"),  # 0 = negative, 255-130, nines complement of 15, ~
    (t.reverse, ("12345",), "54321"),
    (t.reverse_timestamp, ("1694372475", 9999999999), "8305627524"),
    (t.reverse_timestamp, ("8305627524", 9999999999), "1694372475"),
    (t.reverse_timestamp, ("5",), "9999999999994"),
    (t.reverse_domain, ("maps.google.com",), "com.google.maps"),
    (t.lower, ("AbC",), "abc"),
    (t.upper, ("AbC",), "ABC"),
    (t.unshard, ("2023-09-10.7",), "2023-09-10"),
    (t.unshard, ("user_12", "_"), "user"),
    (t.epoch_ms, ("2023-09-10T15:21:48.123Z",), "1694359308123"),
    (t.epoch_s, ("2023-09-10T15:21:48",), "1694359308"),
]


@pytest.mark.parametrize("fn, args, expected", CASES, ids=[f"{case[0].__name__}{case[1]}" for case in CASES])
def test_transform(fn, args, expected):
    assert fn(*args) == expected


REFUSALS = [
    (t.part, ("a#b", 5), "has no part 5"),
    (t.strip_prefix, ("Invoice-1", "Payment-"), "does not start with"),
    (t.strip_suffix, ("a", "b"), "does not end with"),
    (t.pad, ("-3", 4), "non-negative integer"),
    (t.pad, ("12345", 4), "wider than pad width"),
    (t.sortable_number, ("x",), "not a number"),
    (t.reverse_timestamp, ("12a",), "non-negative integer"),
    (t.reverse_timestamp, ("100", 99), "larger than"),
    (t.unshard, ("2023-09-10",), "no write-shard suffix"),
    (t.epoch_ms, ("yesterday",), "not an ISO-8601 time"),
]


@pytest.mark.parametrize("fn, args, message", REFUSALS, ids=[f"{case[0].__name__}{case[1]}" for case in REFUSALS])
def test_transform_refuses(fn, args, message):
    with pytest.raises(t.TransformError, match=message):
        fn(*args)


def test_reverse_timestamp_keeps_newest_first_when_sorted_as_text():
    times = ["1694359308", "1694372475", "1697094531"]
    reversed_keys = [t.reverse_timestamp(value, 9999999999) for value in times]
    assert sorted(reversed_keys) == list(reversed(reversed_keys))


@pytest.mark.parametrize(
    "template, message",
    [
        ("{sk|nope}", "unknown transform 'nope'"),
        ("{sk|pad}", "missing a required argument: 'width'"),
        ("{sk|part(1, 2, 3, 4)}", "too many positional arguments"),
        ("{sk|part(x)}", "must be numbers or quoted strings"),
        ("{}", "empty placeholder"),
        ("{sk", "unbalanced brace"),
        ("", "empty template"),
    ],
)
def test_template_errors(template, message):
    with pytest.raises(TemplateError, match=message):
        parse_template(template)


def test_every_transform_declares_its_inverse_or_its_loss():
    """The decoder reads keys back through this table: a transform with neither would decode as the identity."""
    for name, transform in t.TRANSFORMS.items():
        assert (transform.inverse is None) != (transform.loss is None), name
        assert transform.apply.__name__ == name
    with pytest.raises(TypeError, match="exactly one of an inverse or a loss"):
        t.Transform(t.lower)
    with pytest.raises(TypeError, match="exactly one of an inverse or a loss"):
        t.Transform(t.lower, inverse=t.lower, loss="both")


INVERTIBLE = [case for case in CASES if t.TRANSFORMS[case[0].__name__].inverse]


@pytest.mark.parametrize("fn, args, expected", INVERTIBLE, ids=[f"{case[0].__name__}{case[1]}" for case in INVERTIBLE])
def test_each_inverse_gives_the_value_back(fn, args, expected):
    inverse = t.TRANSFORMS[fn.__name__].inverse
    value, extra = args[0], args[1:]
    assert inverse(fn(value, *extra), *extra) == value


def test_every_transform_has_a_case():
    assert {case[0].__name__ for case in CASES} == set(t.TRANSFORMS)


# Values of each key type a transform may be declared to order, with the arguments it is called with.
ORDER_DOMAINS = {
    ("strip_prefix", "S"): (st.text(max_size=8).map(lambda s: "Pay#" + s), ("Pay#",)),
    ("pad", "N"): (st.integers(0, 10**12 - 1).map(str), (12,)),
    ("sortable_number", "N"): (
        st.builds(lambda m, e: str(Decimal(m).scaleb(e)), st.integers(-(10**38) + 1, 10**38 - 1),
                  st.integers(-100, 80)), ()),
    ("reverse_timestamp", "N"): (st.integers(0, 9_999_999_999).map(str), ()),
}


def test_every_declared_order_is_tested():
    declared = {(name, kind) for name, transform in t.TRANSFORMS.items() for kind in transform.order}
    assert declared == set(ORDER_DOMAINS)


@pytest.mark.parametrize("name, kind", sorted(ORDER_DOMAINS))
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_declared_order_holds_for_the_bytes(name, kind, data):
    """access patterns turn key ranges into row ranges through `order`: the UTF-8 bytes must sort as declared."""
    values, args = ORDER_DOMAINS[(name, kind)]
    a, b = data.draw(values), data.draw(values)
    transform = t.TRANSFORMS[name]
    key = (lambda v: Decimal(v)) if kind == "N" else (lambda v: v.encode())
    out_a, out_b = (transform.apply(v, *args).encode() for v in (a, b))
    if key(a) == key(b):
        return
    assert (out_a < out_b) == ((key(a) < key(b)) == (transform.order[kind] == 1))
