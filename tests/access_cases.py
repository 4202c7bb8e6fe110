"""Sort-key values and key-condition operands that probe DynamoDB's order at its edges, shared by the pure
translation tests and the parity tests against dynalite and the emulator.

N: negatives, decimals, 38 significant digits, the smallest and largest magnitudes DynamoDB stores.
S: UTF-8 byte order differs from UTF-16 order above U+FFFF and around the surrogates (`\\uffff` < `😀` in bytes, not
in UTF-16); upper case before lower case; a prefix before its extensions.
B: unsigned bytes (0x7f < 0x80, which signed comparison would invert); a prefix before its extensions.
"""

from ddb2bt.mappers.access import key_order

NUMBERS = ["-1E+125", "-12345678901234567890123456789012345678", "-10", "-1.5", "-1", "-0.000001", "0", "1E-130",
           "0.5", "1", "1.5", "9", "10", "99.99", "12345678901234567890123456789012345678",
           "9.9999999999999999999999999999999999999E+125"]
STRINGS = ["A", "Z", "a", "a#b", "ab", "b", "é", "ü", "z", "\u00ff", "\u0100", "中文", "😀", "\ud7ff", "\ue000", "\uffff"]
BINARIES = [b"\x00", b"\x00\x00", b"\x00\x01", b"\x01", b"\x7f", b"\x80", b"\x80\x00", b"\xfe", b"\xff", b"\xff\xff"]

EXTRA = {"N": [{"N": "-1.25"}, {"N": "0.75"}, {"N": "-100"}, {"N": "1E+100"}],
         "S": [{"S": "a"}, {"S": "aa"}, {"S": "\u00fe"}, {"S": "zz"}],
         "B": [{"B": b"\x00"}, {"B": b"\x80\x01"}]}
PREFIXES = {"S": [{"S": "a"}, {"S": "é"}, {"S": "x"}, {"S": "\uffff"}], "B": [{"B": b"\x00"}, {"B": b"\x80"}, {"B": b"\xff"}]}


def operand_cases(kind: str, operator: str, sorts: list[dict]) -> list[list[dict]]:
    """Operand lists to try for one operator: stored values and values between them (and beyond)."""
    candidates = sorts[::3] + EXTRA[kind]
    if operator == "begins_with":
        return [[prefix] for prefix in PREFIXES.get(kind, [])]
    if operator == "between":
        # DynamoDB refuses BETWEEN with the low bound above the high one (ValidationException)
        return [[low, high] for low in candidates[::2] for high in candidates[1::2] if key_order(low) <= key_order(high)]
    return [[operand] for operand in candidates]
