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
static int change_line(Bytes at, Bytes end) {
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
    if (change_line(at, at + PyBytes_GET_SIZE(line)))
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

/* A full export's line: '{"Item":' attributes '}', the line's end (AWS writes it compact, with no spaces). */
static PyObject *item_valid(PyObject *self, PyObject *line) {
    (void)self;
    if (!PyBytes_Check(line))
        Py_RETURN_NONE;
    Bytes at = (Bytes)PyBytes_AS_STRING(line), end = at + PyBytes_GET_SIZE(line);
    if (LITERAL(at, end, "{\"Item\":")) {
        at = members(at + 8, end, DEPTH);
        if (at != NULL && at + 1 == end && *at == '}')
            Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}

/* The names check_record reads, made once (interned: a lookup compares them by identity first). */
static PyObject *METADATA, *MICROS, *N, *KEYS, *OLD_IMAGE, *NEW_IMAGE, *EMPTY;

/* A new reference to dict[name] in *found (NULL: absent, or present as None, as record.get answers None for both);
 * 0 where the lookup raised (the error cleared: Python's check answers). */
static int get(PyObject *dict, PyObject *name, PyObject **found) {
    PyObject *value = PyDict_GetItemWithError(dict, name);
    if (value == NULL && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    *found = value == Py_None ? NULL : value;
    Py_XINCREF(*found);
    return 1;
}

/* A str of 1 to 18 ASCII digits (an int64 that cannot overflow) as its value; 0 for anything else, Python's answer. */
static int micros_of(PyObject *text, long long *value) {
    if (!PyUnicode_CheckExact(text))
        return 0;
    Py_ssize_t length;
    const char *digits = PyUnicode_AsUTF8AndSize(text, &length);
    if (digits == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (length < 1 || length > 18)
        return 0;
    long long sum = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        if (!is_digit((unsigned char)digits[i]))
            return 0;
        sum = sum * 10 + (digits[i] - '0');
    }
    *value = sum;
    return 1;
}

/* 1 for what a JSON parser makes (exact str, int, float, bool, None, and lists and dicts of str keys of those, at most
 * 32 levels deep): comparing two of them runs no Python code. 0 for anything else. */
static int plain(PyObject *value, int depth) {
    if (PyUnicode_CheckExact(value) || PyLong_CheckExact(value) || PyFloat_CheckExact(value) || PyBool_Check(value)
        || value == Py_None)
        return 1;
    if (depth <= 0)
        return 0;
    if (PyList_CheckExact(value)) {
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++)
            if (!plain(PyList_GET_ITEM(value, i), depth - 1))
                return 0;
        return 1;
    }
    if (PyDict_CheckExact(value)) {
        Py_ssize_t at = 0;
        PyObject *name, *inner;
        while (PyDict_Next(value, &at, &name, &inner))
            if (!PyUnicode_CheckExact(name) || !plain(inner, depth - 1))
                return 0;
        return 1;
    }
    return 0;
}

/* 1 where image[name] == value for every name and value of keys, as check_record compares them (image.get(name) !=
 * value, false for each); 0 otherwise, and where either side is not plain: Python's check compares those (a comparison
 * that could run Python code is not made twice). Every object it touches is held while it compares. */
static int same_keys(PyObject *keys, PyObject *image) {
    Py_ssize_t at = 0, size = PyDict_GET_SIZE(keys);
    PyObject *name, *value;
    while (PyDict_Next(keys, &at, &name, &value)) {
        if (!PyUnicode_CheckExact(name))
            return 0;
        Py_INCREF(name);
        Py_INCREF(value);
        PyObject *found = NULL;
        int differs = 1;
        if (get(image, name, &found) && found != NULL && plain(found, 32) && plain(value, 32)) {
            PyObject *compared = PyObject_RichCompare(found, value, Py_NE);
            differs = compared == NULL ? -1 : PyObject_IsTrue(compared);
            Py_XDECREF(compared);
            if (differs < 0)
                PyErr_Clear();
        }
        Py_XDECREF(found);
        Py_DECREF(name);
        Py_DECREF(value);
        if (differs != 0 || PyDict_GET_SIZE(keys) != size) /* (plain values compare without changing it) */
            return 0;
    }
    return 1;
}

/* checked_change(record, key_names, line, kinds) -> tuple | None: the fields of the Change check_record returns for
 * (record, key_names, line) where every one of its checks passes, the values vouched for by the line (values_valid);
 * None for anything else (a check that fails, a form it does not take), and check_record's Python answers, or refuses.
 * kinds: (INSERT, MODIFY, REMOVE). */
static PyObject *checked_change(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "checked_change(record, key_names, line, kinds) takes 4 arguments");
        return NULL;
    }
    PyObject *record = args[0], *key_names = args[1], *line = args[2], *kinds = args[3];
    if (!PyDict_CheckExact(record) || !PyTuple_CheckExact(key_names) || !PyBytes_Check(line)
        || !PyTuple_CheckExact(kinds) || PyTuple_GET_SIZE(kinds) != 3)
        Py_RETURN_NONE;
    Bytes start = (Bytes)PyBytes_AS_STRING(line);
    if (!change_line(start, start + PyBytes_GET_SIZE(line)))
        Py_RETURN_NONE;
    PyObject *metadata = NULL, *micros = NULL, *text = NULL, *keys = NULL, *old = NULL, *new = NULL, *result = NULL;
    long long time_us;
    if (!get(record, METADATA, &metadata) || metadata == NULL || !PyDict_CheckExact(metadata)
        || !get(metadata, MICROS, &micros) || micros == NULL || !PyDict_CheckExact(micros)
        || !get(micros, N, &text) || text == NULL || !micros_of(text, &time_us))
        goto done;
    if (!get(record, KEYS, &keys) || keys == NULL || !PyDict_CheckExact(keys) || PyDict_GET_SIZE(keys) == 0)
        goto done;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(key_names); i++) {
        PyObject *name = PyTuple_GET_ITEM(key_names, i);
        if (!PyUnicode_CheckExact(name))
            goto done;
        int present = PyDict_Contains(keys, name);
        if (present < 0)
            PyErr_Clear();
        if (present != 1)
            goto done;
    }
    if (!get(record, OLD_IMAGE, &old) || !get(record, NEW_IMAGE, &new) || (old == NULL && new == NULL))
        goto done;
    if ((old != NULL && (!PyDict_CheckExact(old) || !same_keys(keys, old)))
        || (new != NULL && (!PyDict_CheckExact(new) || !same_keys(keys, new))))
        goto done;
    PyObject *kind = PyTuple_GET_ITEM(kinds, new == NULL ? 2 : old == NULL ? 0 : 1);
    PyObject *when = PyLong_FromLongLong(time_us);
    if (when == NULL)
        goto done;
    result = PyTuple_Pack(7, keys, old ? old : Py_None, new ? new : Py_None, kind, when, EMPTY, Py_False);
    Py_DECREF(when);
done:
    Py_XDECREF(metadata);
    Py_XDECREF(micros);
    Py_XDECREF(text);
    Py_XDECREF(keys);
    Py_XDECREF(old);
    Py_XDECREF(new);
    if (result == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return result; /* NULL only with an error of its own making (no memory): raised */
}

static PyMethodDef methods[] = {
    {"values_valid", (PyCFunction)values_valid, METH_O,
     "values_valid(line) -> bool | None: incremental_export.VALUES_VALID.fullmatch(line) is not None for bytes, "
     "else None."},
    {"item_valid", (PyCFunction)item_valid, METH_O,
     "item_valid(line) -> bool | None: for bytes, True only where the line is a compact '{\"Item\":{...}}' every value "
     "of which DynamoDB writes (values_valid's grammar), else False; None for anything but bytes."},
    {"checked_change", (PyCFunction)(void (*)(void))checked_change, METH_FASTCALL,
     "checked_change(record, key_names, line, kinds) -> tuple | None: check_record's Change fields where every check "
     "passes with the line's values vouched for, else None (check_record's Python answers)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_vouch", NULL, 0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__vouch(void) {
    static PyObject **names[] = {&METADATA, &MICROS, &N, &KEYS, &OLD_IMAGE, &NEW_IMAGE, &EMPTY};
    static const char *texts[] = {"Metadata", "WriteTimestampMicros", "N", "Keys", "OldImage", "NewImage", ""};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (*names[i] == NULL && (*names[i] = PyUnicode_InternFromString(texts[i])) == NULL)
            return NULL;
    }
    return PyModule_Create(&module);
}
