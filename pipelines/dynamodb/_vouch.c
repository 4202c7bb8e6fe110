/* Whether an incremental export's line holds only valid DynamoDB values: the compiled twin of
 * incremental_export.VALUES_VALID.fullmatch(line) is not None (docs/PERFORMANCE.md, "Catch-up round 10").
 *
 * values_valid(line) -> bool | None
 *
 * True exactly where the expression matches the whole line, False exactly where it does not; None for anything that
 * is not bytes (the expression answers). The expression (incremental_export._values_pattern, depth 3) is a grammar
 * with one reading per line: every alternative is told apart by its first bytes (the type tags, the record's member
 * names) and every loop by the byte after an item (',' and the next item's first byte, or the closing bracket), so a
 * recursive descent that fails wherever the expression's possessive loops and lookaheads fail answers as it does,
 * without sre's per-token interpretation: a change line of ~1.2 KB in ~1 us against ~9 (the check's largest part,
 * "Catch-up round 9"). A line it answers False for is checked value by value in Python, as before; a line it answers
 * True for holds only values that is_value takes (tests/pipelines/test_vouch_compiled.py holds it to the expression).
 *
 * It reads only the bytes object's buffer and calls nothing that can run Python code.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef const unsigned char *Bytes;

/* MAX_NUMBER: a number's text has at most 38 characters (the expression's lookahead, _number_ok's own first test).
 * DEPTH: M and L nested at most three levels under an attribute (_values_pattern(3)). */
enum { MAX_NUMBER = 38, DEPTH = 3 };

static int is_base64(unsigned char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/';
}

static int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

/* Each reader takes the position of its first byte and the line's end; it returns the position after what it read,
 * or NULL where the expression fails. */

/* '"', then bytes other than '"' and '\\', or '\\' and any byte but '\n' (the expression's '.'), then '"'. */
static Bytes text(Bytes at, Bytes end) {
    if (at >= end || *at != '"')
        return NULL;
    for (at++; at < end; at++) {
        if (*at == '"')
            return at + 1;
        if (*at == '\\') {
            if (at + 1 >= end || at[1] == '\n')
                return NULL;
            at++;
        }
    }
    return NULL;
}

/* '"', a plain decimal (-?(digits(.digits*)?|.digits)) of 1 to 38 characters, '"'. */
static Bytes number(Bytes at, Bytes end) {
    if (at >= end || *at != '"')
        return NULL;
    Bytes start = ++at;
    if (at < end && *at == '-')
        at++;
    Bytes whole = at;
    while (at < end && is_digit(*at))
        at++;
    int has_whole = at > whole;
    if (at < end && *at == '.') {
        Bytes fraction = ++at;
        while (at < end && is_digit(*at))
            at++;
        if (!has_whole && at == fraction)
            return NULL;
    } else if (!has_whole) {
        return NULL;
    }
    if (at >= end || *at != '"' || at - start > MAX_NUMBER)
        return NULL;
    return at + 1;
}

/* '"', base64 in groups of four with at most the last padded ("xx==" or "xxx="), '"'; "" too. */
static Bytes binary(Bytes at, Bytes end) {
    if (at >= end || *at != '"')
        return NULL;
    Bytes start = ++at;
    while (at < end && is_base64(*at))
        at++;
    size_t left = (size_t)(at - start) % 4;
    if (left == 2) {
        if (end - at < 2 || at[0] != '=' || at[1] != '=')
            return NULL;
        at += 2;
    } else if (left == 3) {
        if (at >= end || *at != '=')
            return NULL;
        at++;
    } else if (left != 0) {
        return NULL;
    }
    return at < end && *at == '"' ? at + 1 : NULL;
}

static Bytes value(Bytes at, Bytes end, int depth);

enum Item { TEXT, NUMBER, BINARY, VALUE };

static Bytes item(Bytes at, Bytes end, enum Item kind, int depth) {
    switch (kind) {
    case TEXT: return text(at, end);
    case NUMBER: return number(at, end);
    case BINARY: return binary(at, end);
    default: return value(at, end, depth);
    }
}

/* '[', items each followed by ',' and the next item's first byte ('"', or '{' for values) or by ']', ']'; at least
 * one item where least_one (the sets), none allowed otherwise (L). */
static Bytes elements(Bytes at, Bytes end, enum Item kind, int depth, int least_one) {
    unsigned char first = kind == VALUE ? '{' : '"';
    if (at >= end || *at != '[')
        return NULL;
    at++;
    if (at < end && *at == ']')
        return least_one ? NULL : at + 1;
    for (;;) {
        at = item(at, end, kind, depth);
        if (at == NULL || at >= end)
            return NULL;
        if (*at == ']')
            return at + 1;
        if (*at != ',' || at + 1 >= end || at[1] != first)
            return NULL;
        at++;
    }
}

/* '{', members '"name":value' each followed by ',' and '"' or by '}', '}'; none allowed. */
static Bytes members(Bytes at, Bytes end, int depth) {
    if (at >= end || *at != '{')
        return NULL;
    at++;
    if (at < end && *at == '}')
        return at + 1;
    for (;;) {
        at = text(at, end);
        if (at == NULL || at >= end || *at != ':')
            return NULL;
        at = value(at + 1, end, depth);
        if (at == NULL || at >= end)
            return NULL;
        if (*at == '}')
            return at + 1;
        if (*at != ',' || at + 1 >= end || at[1] != '"')
            return NULL;
        at++;
    }
}

static int starts(Bytes at, Bytes end, const char *literal, size_t size) {
    return (size_t)(end - at) >= size && memcmp(at, literal, size) == 0;
}

#define LITERAL(at, end, text) starts((at), (end), (text), sizeof(text) - 1)

/* '{"TAG":payload}': a scalar's tag and payload, or at depth > 0 M (members at depth - 1) or L (elements). */
static Bytes value(Bytes at, Bytes end, int depth) {
    if (!LITERAL(at, end, "{\""))
        return NULL;
    at += 2;
    if (LITERAL(at, end, "S\":"))
        at = text(at + 3, end);
    else if (LITERAL(at, end, "N\":"))
        at = number(at + 3, end);
    else if (LITERAL(at, end, "BOOL\":true"))
        at += 10;
    else if (LITERAL(at, end, "BOOL\":false"))
        at += 11;
    else if (LITERAL(at, end, "NULL\":true"))
        at += 10;
    else if (LITERAL(at, end, "B\":"))
        at = binary(at + 3, end);
    else if (LITERAL(at, end, "SS\":"))
        at = elements(at + 4, end, TEXT, 0, 1);
    else if (LITERAL(at, end, "NS\":"))
        at = elements(at + 4, end, NUMBER, 0, 1);
    else if (LITERAL(at, end, "BS\":"))
        at = elements(at + 4, end, BINARY, 0, 1);
    else if (depth > 0 && LITERAL(at, end, "M\":"))
        at = members(at + 3, end, depth - 1);
    else if (depth > 0 && LITERAL(at, end, "L\":"))
        at = elements(at + 3, end, VALUE, depth - 1, 0);
    else
        return NULL;
    return at != NULL && at < end && *at == '}' ? at + 1 : NULL;
}

/* The record: '{', members Keys (attributes), OldImage or NewImage (attributes or null) and
 * Metadata ({"WriteTimestampMicros":{"N":"digits"}}), any of them, in any order, at least one, '}', the line's end. */
static int record(Bytes at, Bytes end) {
    if (at >= end || *at != '{')
        return 0;
    at++;
    for (;;) {
        if (LITERAL(at, end, "\"Keys\":")) {
            at = members(at + 7, end, DEPTH);
        } else if (LITERAL(at, end, "\"OldImage\":") || LITERAL(at, end, "\"NewImage\":")) {
            at += 11;
            at = LITERAL(at, end, "null") ? at + 4 : members(at, end, DEPTH);
        } else if (LITERAL(at, end, "\"Metadata\":{\"WriteTimestampMicros\":{\"N\":\"")) {
            at += sizeof("\"Metadata\":{\"WriteTimestampMicros\":{\"N\":\"") - 1;
            Bytes digits = at;
            while (at < end && is_digit(*at))
                at++;
            at = at > digits && LITERAL(at, end, "\"}}") ? at + 3 : NULL;
        } else {
            return 0;
        }
        if (at == NULL || at >= end)
            return 0;
        if (*at == '}')
            return at + 1 == end;
        if (*at != ',' || at + 1 >= end || at[1] != '"')
            return 0;
        at++;
    }
}

static PyObject *values_valid(PyObject *self, PyObject *line) {
    (void)self;
    if (!PyBytes_Check(line))
        Py_RETURN_NONE;
    Bytes at = (Bytes)PyBytes_AS_STRING(line);
    if (record(at, at + PyBytes_GET_SIZE(line)))
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"values_valid", (PyCFunction)values_valid, METH_O,
     "values_valid(line) -> bool | None: incremental_export.VALUES_VALID.fullmatch(line) is not None for bytes, "
     "else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_vouch", NULL, 0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__vouch(void) { return PyModule_Create(&module); }
