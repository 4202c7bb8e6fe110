"""A deterministic single-table e-commerce dataset in DynamoDB wire format.

One table, key ``pk`` (S) + ``sk`` (S), five entity types in a fixed mix per block of 20 items:

=========== ===================================== ============================ ====
entity      pk                                    sk                           /20
=========== ===================================== ============================ ====
customer    ``CUST#<id:07>``                      ``PROFILE``                    1
order       ``CUST#<id:07>``                      ``ORDER#<epoch ms>#<id:08>``   4
order_line  ``ORDER#<id:08>``                     ``LINE#<n:03>``                8
product     ``PROD#<id:07>``                      ``META``                       2
review      ``PROD#<id:07>``                      ``REVIEW#<epoch ms>#<id:08>``  5
=========== ===================================== ============================ ====

8-15 attributes each: strings, exact decimals, big integers (up to 38 digits), maps (nested),
string/number/binary sets, lists of maps, booleans, NULLs and binaries. About one product in
1,000 is *large* (a 100-300 KB description and a binary image), as real catalogs have.

Numbers are written in canonical form (no trailing zeros, no exponent) as DynamoDB itself
returns them, so any correct translation gives the same bytes. Same seed, same items.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

SEED = 20240501
BLOCK = ("customer", "order", "order", "order", "order", "line", "line", "line", "line", "line", "line", "line",
         "line", "product", "product", "review", "review", "review", "review", "review")
LARGE_EVERY = 1000  # one product in LARGE_EVERY is a large item (100-300 KB)
BASE_MS = 1_600_000_000_000

_WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
          "quebec romeo sierra tango uniform victor whiskey xray yankee zulu zürich straße café naïve").split()
_CITIES = ("Zürich", "Berlin", "Lyon", "Porto", "Kraków", "Malmö", "Dublin", "Oslo", "Turin", "Ghent")
_TIERS = ("bronze", "silver", "gold", "platinum")
_STATUS = ("placed", "paid", "shipped", "delivered", "returned")
_CATEGORIES = ("books", "garden", "kitchen", "toys", "audio", "video", "sports", "office", "outdoor", "tools")
_COLORS = ("red", "green", "blue", "black", "white", "grey")


def _money(rng: random.Random, high: int) -> str:
    """A canonical decimal: '12.5', '7', '1234.05' (DynamoDB drops trailing zeros)."""
    cents = rng.randrange(1, high * 100)
    whole, frac = divmod(cents, 100)
    if frac == 0:
        return str(whole)
    text = f"{whole}.{frac:02d}"
    return text.rstrip("0")


def _dec(units: int, places: int) -> str:
    """Canonical decimal text of units / 10**places ('-12.3', '0.05', '7')."""
    sign = "-" if units < 0 else ""
    whole, frac = divmod(abs(units), 10**places)
    text = f"{sign}{whole}.{frac:0{places}d}".rstrip("0").rstrip(".") if frac else f"{sign}{whole}"
    return "0" if text == "-0" else text


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choices(_WORDS, k=n))


def _iso(ms: int) -> str:
    # ISO-8601 UTC, millisecond precision, built without datetime (fast and exact)
    import time

    seconds, millis = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def _customer(rng: random.Random, block: int) -> dict[str, Any]:
    cid = f"{block:07d}"
    created = BASE_MS + rng.randrange(10**10)
    item = {
        "pk": {"S": f"CUST#{cid}"}, "sk": {"S": "PROFILE"}, "type": {"S": "customer"},
        "name": {"S": f"{_words(rng, 2).title()}"},
        "email": {"S": f"user{cid}@example.com"},
        "created_at": {"S": _iso(created)},
        "tier": {"S": rng.choice(_TIERS)},
        "balance": {"N": _money(rng, 5000)},
        # a big integer: more digits than int64 holds (decimal text keeps it exact)
        "lifetime_value": {"N": str(rng.randrange(10**20, 10**37))},
        "loyalty_points": {"N": str(rng.randrange(0, 10**6))},
        "tags": {"SS": sorted(set(rng.choices(("vip", "newsletter", "b2b", "beta", "churn-risk", "eu"), k=3)))},
        "address": {"M": {"street": {"S": f"{rng.randrange(1, 300)} {_words(rng, 2)}"},
                          "city": {"S": rng.choice(_CITIES)}, "zip": {"N": str(rng.randrange(1000, 99999))},
                          "geo": {"M": {"lat": {"N": _dec(rng.randrange(-800_000, 800_000), 4)},
                                        "lon": {"N": _dec(rng.randrange(-1_700_000, 1_700_000), 4)}}}}},
        "phones": {"L": [{"S": f"+41 {rng.randrange(10**8, 10**9)}"} for _ in range(rng.randrange(1, 3))]},
        "marketing_opt_in": {"BOOL": rng.random() < 0.4},
    }
    if rng.random() < 0.3:
        item["referrer"] = {"NULL": True}
    return item


def _order(rng: random.Random, block: int, n: int) -> dict[str, Any]:
    oid = f"{block * 4 + n:08d}"
    placed = BASE_MS + rng.randrange(10**10)
    lines = rng.randrange(1, 6)
    item = {
        "pk": {"S": f"CUST#{block:07d}"}, "sk": {"S": f"ORDER#{placed}#{oid}"}, "type": {"S": "order"},
        "status": {"S": rng.choice(_STATUS)},
        "total": {"N": _money(rng, 2000)},
        "currency": {"S": rng.choice(("EUR", "CHF", "USD"))},
        "placed_at": {"N": str(placed)},
        "line_count": {"N": str(lines)},
        "shipping": {"M": {"method": {"S": rng.choice(("post", "courier", "pickup"))},
                           "cost": {"N": _money(rng, 30)},
                           "address": {"M": {"city": {"S": rng.choice(_CITIES)},
                                             "zip": {"N": str(rng.randrange(1000, 99999))}}}}},
        "discounts": {"L": [{"M": {"code": {"S": f"D{rng.randrange(1000)}"}, "amount": {"N": _money(rng, 20)}}}
                            for _ in range(rng.randrange(0, 3))]},
        "coupon_codes": {"SS": [f"C{c}" for c in sorted(rng.sample(range(100), rng.randrange(1, 4)))]},
        "gift": {"BOOL": rng.random() < 0.1},
    }
    if rng.random() < 0.5:
        item["notes"] = {"S": _words(rng, rng.randrange(3, 20))}
    return item


def _line(rng: random.Random, block: int, n: int) -> dict[str, Any]:
    qty = rng.randrange(1, 10)
    price = _money(rng, 200)
    return {
        "pk": {"S": f"ORDER#{block * 4 + n // 2:08d}"}, "sk": {"S": f"LINE#{n:03d}"}, "type": {"S": "line"},
        "product_id": {"S": f"{rng.randrange(10**6):07d}"},
        "sku": {"S": f"SKU-{rng.randrange(10**8):08d}"},
        "qty": {"N": str(qty)},
        "unit_price": {"N": price},
        "weight_kg": {"N": _dec(rng.randrange(1, 5000), 2)},
        "options": {"M": {"color": {"S": rng.choice(_COLORS)}, "size": {"S": rng.choice("SMLX")}}},
        "serials": {"NS": [str(rng.randrange(10**12)) for _ in range(rng.randrange(1, 4))]},
        "backordered": {"BOOL": rng.random() < 0.05},
    }


def _product(rng: random.Random, block: int, n: int, large: bool) -> dict[str, Any]:
    pid = f"{block * 2 + n:07d}"
    description = _words(rng, rng.randrange(20, 80))
    image = rng.randbytes(rng.randrange(200, 600))
    if large:
        size = rng.randrange(100_000, 300_000)
        description = (description + " ") * (size // 2 // (len(description) + 1) + 1)
        description = description[: size // 2]
        image = rng.randbytes(size // 2)
    return {
        "pk": {"S": f"PROD#{pid}"}, "sk": {"S": "META"}, "type": {"S": "product"},
        "title": {"S": _words(rng, 4).title()},
        "description": {"S": description},
        "price": {"N": _money(rng, 500)},
        "stock": {"N": str(rng.randrange(0, 10_000))},
        "rating": {"N": _dec(rng.randrange(10, 50), 1)},
        "categories": {"SS": sorted(rng.sample(_CATEGORIES, rng.randrange(1, 4)))},
        "dimensions": {"M": {"w": {"N": _money(rng, 100)}, "h": {"N": _money(rng, 100)},
                             "d": {"N": _money(rng, 100)}}},
        "specs": {"M": {f"spec_{k}": {"S": _words(rng, 2)} for k in range(rng.randrange(2, 6))}},
        "image": {"B": image},
        "thumbs": {"BS": [rng.randbytes(16) for _ in range(rng.randrange(1, 3))]},
        "related": {"L": [{"S": f"{rng.randrange(10**6):07d}"} for _ in range(rng.randrange(0, 5))]},
    }


def _review(rng: random.Random, block: int, n: int) -> dict[str, Any]:
    at = BASE_MS + rng.randrange(10**10)
    rid = f"{block * 5 + n:08d}"
    return {
        "pk": {"S": f"PROD#{block * 2 + n % 2:07d}"}, "sk": {"S": f"REVIEW#{at}#{rid}"}, "type": {"S": "review"},
        "customer_id": {"S": f"{rng.randrange(10**6):07d}"},
        "stars": {"N": str(rng.randrange(1, 6))},
        "title": {"S": _words(rng, rng.randrange(2, 6))},
        "body": {"S": _words(rng, rng.randrange(10, 60))},
        "helpful_votes": {"N": str(rng.randrange(0, 500))},
        "verified": {"BOOL": rng.random() < 0.7},
        "language": {"S": rng.choice(("en", "de", "fr", "it"))},
        "score": {"N": f"{rng.randrange(0, 10**9)}.{rng.randrange(1, 10)}"},  # a decimal with 10 digits
    }


def generate(n: int, seed: int = SEED) -> Iterator[dict[str, Any]]:
    """``n`` items, the same ones for the same seed, streamed (constant memory)."""
    rng = random.Random(seed)
    counters = {name: 0 for name in set(BLOCK)}
    for index in range(n):
        block, slot = divmod(index, len(BLOCK))
        kind = BLOCK[slot]
        if slot == 0:
            counters = dict.fromkeys(counters, 0)
        k = counters[kind]
        counters[kind] = k + 1
        if kind == "customer":
            yield _customer(rng, block)
        elif kind == "order":
            yield _order(rng, block, k)
        elif kind == "line":
            yield _line(rng, block, k)
        elif kind == "product":
            yield _product(rng, block, k, large=(block * 2 + k) % LARGE_EVERY == LARGE_EVERY // 2)
        else:
            yield _review(rng, block, k)


def summary(items) -> dict[str, Any]:
    """Counts per entity type and the number of large (>= 100 KB) items, for the report."""
    import json

    from ddb2bt.mappers.attrvalue import to_export_json

    kinds: dict[str, int] = {}
    large = 0
    size = 0
    for item in items:
        kinds[item["type"]["S"]] = kinds.get(item["type"]["S"], 0) + 1
        length = len(json.dumps(to_export_json(item)))
        size += length
        large += length >= 100_000
    return {"entities": kinds, "large_items": large, "json_bytes": size}

