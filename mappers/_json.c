/* The mapper's compiled encoders: the twins of Python functions in encodings.py and specialise.py for the values they
 * take (docs/PERFORMANCE.md, "JSON cells compiled" and "Own CPU round 10").
 *
 * json_bytes(value) -> bytes | None: encodings._json_text(value).encode() (the `json` encoding).
 * typed_json_bytes(value) -> bytes | None: encodings.encode_ddb_json(value) (the `ddb_json` encoding).
 * auto_bytes(value) -> bytes | None: encodings.encode_auto(value) (the `auto` encoding).
 * float64_bytes(value) -> bytes | None: encodings._fast_float64's bytes (the `float64` encoding's shortest texts).
 * cells(item, program, ts, cells) -> int | None: a run of a specialised map function's columns (see there).
 * row(row_type, key, cells, entity) -> row | None: a specialised map function's row, its atoms-only tuples untracked.
 *
 * json_bytes takes S (a str, escaped as json.encoder.encode_basestring escapes it), N (a str already canonical decimal
 * text, as attrvalue.is_canonical_number says), BOOL (True or False), NULL, L (a list) and M (a dict of str keys, in
 * sorted order), nested to at most 65 levels (64 L or M around a scalar); typed_json_bytes the same, each value as its
 * one-tag object, NULL only as true. Anything else gives None and the Python function answers: a number that is
 * not canonical text, B and sets, a payload of another type, a string that is not UTF-8 (a lone surrogate), keys that
 * are not str. So every value's bytes are the Python function's (tests/mappers/test_json_compiled.py,
 * tests/mappers/test_encoders_compiled.py), and every refusal is said in one place.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_tuple_subclass.h" /* python_tuple_subclass, tuple_subclass_probe */

typedef struct {
    char *data;
    size_t size, capacity;
} Buffer;

static int grow(Buffer *out, size_t more) {
    if (out->size + more <= out->capacity)
        return 1;
    size_t capacity = out->capacity ? out->capacity : 256;
    while (capacity < out->size + more)
        capacity *= 2;
    char *data = PyMem_Realloc(out->data, capacity);
    if (data == NULL)
        return 0;
    out->data = data;
    out->capacity = capacity;
    return 1;
}

static int put(Buffer *out, const char *data, size_t size) {
    if (!grow(out, size))
        return 0;
    memcpy(out->data + out->size, data, size);
    out->size += size;
    return 1;
}

/* A str as JSON text: '"', the UTF-8 bytes with '"', '\\' and the control characters escaped as
 * json.encoder.encode_basestring does (\n, \r, \t, \b, \f by name, the others as \u00XX), '"'. 0: not taken. */
static int put_string(Buffer *out, PyObject *text) {
    static const char hex[] = "0123456789abcdef";
    if (!PyUnicode_CheckExact(text))
        return 0;
    Py_ssize_t length;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &length);
    if (utf8 == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (!grow(out, (size_t)length * 6 + 2))
        return -1;
    char *at = out->data + out->size;
    *at++ = '"';
    for (Py_ssize_t i = 0; i < length; i++) {
        unsigned char c = (unsigned char)utf8[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            *at++ = (char)c;
            continue;
        }
        *at++ = '\\';
        switch (c) {
        case '"': *at++ = '"'; break;
        case '\\': *at++ = '\\'; break;
        case '\n': *at++ = 'n'; break;
        case '\r': *at++ = 'r'; break;
        case '\t': *at++ = 't'; break;
        case '\b': *at++ = 'b'; break;
        case '\f': *at++ = 'f'; break;
        default:
            *at++ = 'u';
            *at++ = '0';
            *at++ = '0';
            *at++ = hex[c >> 4];
            *at++ = hex[c & 0xF];
        }
    }
    *at++ = '"';
    out->size = (size_t)(at - out->data);
    return 1;
}

/* attrvalue.is_canonical_number: -?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?, at most 38 characters, not "-0". */
static int canonical_number(const char *text, Py_ssize_t length) {
    if (length == 0 || length > 38)
        return 0;
    Py_ssize_t i = 0;
    if (text[i] == '-')
        i++;
    if (i >= length || text[i] < '0' || text[i] > '9')
        return 0;
    if (text[i] == '0') {
        i++;
    } else {
        while (i < length && text[i] >= '0' && text[i] <= '9')
            i++;
    }
    if (i < length) {
        if (text[i] != '.' || i + 1 >= length)
            return 0;
        for (Py_ssize_t j = i + 1; j < length; j++)
            if (text[j] < '0' || text[j] > '9')
                return 0;
        if (text[length - 1] == '0')
            return 0;
    }
    return !(length == 2 && text[0] == '-' && text[1] == '0');
}

static int put_value_held(Buffer *out, PyObject *tag, PyObject *payload, int depth, int typed);

/* 1: written; 0: not taken (the Python function answers); -1: an error (out of memory).
 * The value's tag and payload are held while they are written: a list made on the way (a map's keys) may start a
 * garbage collection, whose finalizers could change the value under borrowed references (Python 3.10, 3.11). */
static int put_value(Buffer *out, PyObject *value, int depth, int typed) {
    if (depth > 64 || !PyDict_CheckExact(value) || PyDict_GET_SIZE(value) != 1)
        return 0;
    Py_ssize_t position = 0;
    PyObject *tag, *payload;
    PyDict_Next(value, &position, &tag, &payload);
    if (!PyUnicode_CheckExact(tag))
        return 0;
    Py_INCREF(tag);
    Py_INCREF(payload);
    int done = put_value_held(out, tag, payload, depth, typed);
    Py_DECREF(payload);
    Py_DECREF(tag);
    return done;
}

static int put_payload(Buffer *out, PyObject *tag, PyObject *payload, int depth, int typed);

/* A typed value is its one-tag object around its payload: {"S":...}, {"N":"..."}, {"BOOL":...}, {"NULL":true},
 * {"L":[...]}, {"M":{...}} (json.dumps(to_typed_json(value), sort_keys=True, separators=(",", ":"),
 * ensure_ascii=False)). */
static int put_value_held(Buffer *out, PyObject *tag, PyObject *payload, int depth, int typed) {
    if (!typed)
        return put_payload(out, tag, payload, depth, 0);
    const char *name;
    Py_ssize_t length;
    name = PyUnicode_AsUTF8AndSize(tag, &length);
    if (name == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (length > 4)
        return 0;
    if (!put(out, "{\"", 2) || !put(out, name, (size_t)length) || !put(out, "\":", 2))
        return -1;
    int done = put_payload(out, tag, payload, depth, 1);
    if (done == 1 && !put(out, "}", 1))
        return -1;
    return done;
}

static int put_payload(Buffer *out, PyObject *tag, PyObject *payload, int depth, int typed) {
    if (PyUnicode_CompareWithASCIIString(tag, "S") == 0)
        return put_string(out, payload);
    if (PyUnicode_CompareWithASCIIString(tag, "N") == 0) {
        if (!PyUnicode_CheckExact(payload) || PyUnicode_READY(payload) < 0) {
            PyErr_Clear();
            return 0;
        }
        if (!PyUnicode_IS_ASCII(payload))
            return 0;
        Py_ssize_t length = PyUnicode_GET_LENGTH(payload);
        const char *text = (const char *)PyUnicode_DATA(payload);
        if (!canonical_number(text, length))
            return 0;
        if (typed)
            return put(out, "\"", 1) && put(out, text, (size_t)length) && put(out, "\"", 1) ? 1 : -1;
        return put(out, text, (size_t)length) ? 1 : -1;
    }
    if (PyUnicode_CompareWithASCIIString(tag, "BOOL") == 0) {
        if (payload == Py_True)
            return put(out, "true", 4) ? 1 : -1;
        if (payload == Py_False)
            return put(out, "false", 5) ? 1 : -1;
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(tag, "NULL") == 0) {
        if (!typed)
            return put(out, "null", 4) ? 1 : -1;
        if (payload != Py_True) /* to_typed_json keeps NULL's payload as it is: json.dumps writes whatever it is */
            return 0;
        return put(out, "true", 4) ? 1 : -1;
    }
    if (PyUnicode_CompareWithASCIIString(tag, "L") == 0) {
        if (!PyList_CheckExact(payload))
            return 0;
        if (!put(out, "[", 1))
            return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(payload); i++) {
            if (i && !put(out, ",", 1))
                return -1;
            int done = put_value(out, PyList_GET_ITEM(payload, i), depth + 1, typed); /* held by put_value before any allocation */
            if (done != 1)
                return done;
        }
        return put(out, "]", 1) ? 1 : -1;
    }
    if (PyUnicode_CompareWithASCIIString(tag, "M") == 0) {
        if (!PyDict_CheckExact(payload))
            return 0;
        PyObject *names = PyDict_Keys(payload);
        if (names == NULL)
            return -1;
        int done = 1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names) && done == 1; i++)
            if (!PyUnicode_CheckExact(PyList_GET_ITEM(names, i)))
                done = 0;
        if (done == 1 && PyList_Sort(names) < 0)
            done = -1;
        if (done == 1 && !put(out, "{", 1))
            done = -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names) && done == 1; i++) {
            PyObject *name = PyList_GET_ITEM(names, i);
            if (i && !put(out, ",", 1)) {
                done = -1;
                break;
            }
            done = put_string(out, name);
            if (done == 1 && !put(out, ":", 1))
                done = -1;
            if (done == 1) {
                PyObject *inner = PyDict_GetItemWithError(payload, name);
                done = inner == NULL ? (PyErr_Occurred() ? -1 : 0) : put_value(out, inner, depth + 1, typed);
            }
        }
        Py_DECREF(names);
        if (done == 1 && !put(out, "}", 1))
            done = -1;
        return done;
    }
    return 0;
}

/* The buffer as bytes (done 1), NULL with no error set (done 0: not taken), NULL with an error (done -1). */
static PyObject *finish(Buffer *out, int done) {
    PyObject *result = NULL;
    if (done == 1)
        result = PyBytes_FromStringAndSize(out->data, (Py_ssize_t)out->size);
    else if (done == -1 && !PyErr_Occurred())
        PyErr_NoMemory();
    PyMem_Free(out->data);
    return result;
}

static PyObject *json_encoded(PyObject *value, int typed) {
    Buffer out = {NULL, 0, 0};
    return finish(&out, put_value(&out, value, 0, typed));
}

/* A value's only tag and payload, borrowed (the value is held by the caller): 0 if it is no exact dict of one str tag. */
static int tag_of(PyObject *value, PyObject **tag, PyObject **payload) {
    if (!PyDict_CheckExact(value) || PyDict_GET_SIZE(value) != 1)
        return 0;
    Py_ssize_t position = 0;
    PyDict_Next(value, &position, tag, payload);
    return PyUnicode_CheckExact(*tag);
}

/* An exact str's ASCII text, or NULL (no error set) for any other. */
static const char *ascii_of(PyObject *text, Py_ssize_t *length) {
    if (!PyUnicode_CheckExact(text) || PyUnicode_READY(text) < 0) {
        PyErr_Clear();
        return NULL;
    }
    if (!PyUnicode_IS_ASCII(text))
        return NULL;
    *length = PyUnicode_GET_LENGTH(text);
    return (const char *)PyUnicode_DATA(text);
}

/* An exact str as UTF-8 bytes, NULL (no error set) for any other or a lone surrogate. */
static PyObject *utf8_of(PyObject *text) {
    if (!PyUnicode_CheckExact(text))
        return NULL;
    PyObject *data = PyUnicode_AsUTF8String(text);
    if (data == NULL && PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
        PyErr_Clear();
    return data;
}

/* encodings.encode_auto: a str neither empty nor starting with '{' as its UTF-8, a canonical N as {"N":"..."}, any
 * other value as its typed JSON. */
static PyObject *auto_encoded(PyObject *value) {
    PyObject *tag, *payload;
    if (!tag_of(value, &tag, &payload))
        return NULL;
    if (PyUnicode_CompareWithASCIIString(tag, "S") == 0 && PyUnicode_CheckExact(payload) &&
        PyUnicode_READY(payload) == 0 && PyUnicode_GET_LENGTH(payload) > 0 && PyUnicode_READ_CHAR(payload, 0) != '{')
        return utf8_of(payload);
    if (PyUnicode_CompareWithASCIIString(tag, "N") == 0) {
        Py_ssize_t length;
        const char *text = ascii_of(payload, &length);
        if (text == NULL || !canonical_number(text, length))
            return NULL;
        PyObject *data = PyBytes_FromStringAndSize(NULL, length + 8);
        if (data == NULL)
            return NULL;
        char *at = PyBytes_AS_STRING(data);
        memcpy(at, "{\"N\":\"", 6);
        memcpy(at + 6, text, (size_t)length);
        memcpy(at + 6 + length, "\"}", 2);
        return data;
    }
    return json_encoded(value, 1);
}

/* encodings._fast_float64: an N whose text is its float's shortest text (repr, or repr without its ".0"), with no
 * exponent, not inf or nan and not starting with "-0", as the float's big-endian IEEE bytes. Only texts of ASCII
 * digits, '-' and '.' are read here: any other is no float's repr (or float() refuses it), so Python answers. */
static PyObject *float64_encoded(PyObject *value) {
    PyObject *tag, *payload;
    if (!tag_of(value, &tag, &payload) || PyUnicode_CompareWithASCIIString(tag, "N") != 0)
        return NULL;
    Py_ssize_t length;
    const char *text = ascii_of(payload, &length);
    if (text == NULL || length == 0 || length > 64 || (length >= 2 && text[0] == '-' && text[1] == '0'))
        return NULL;
    for (Py_ssize_t i = 0; i < length; i++)
        if (!((text[i] >= '0' && text[i] <= '9') || text[i] == '-' || text[i] == '.'))
            return NULL;
    char *end = NULL;
    double number = PyOS_string_to_double(text, &end, NULL);
    if (number == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return NULL;
    }
    if (end != text + length)
        return NULL;
    char *shortest = PyOS_double_to_string(number, 'r', 0, Py_DTSF_ADD_DOT_0, NULL); /* what repr() writes */
    if (shortest == NULL)
        return NULL; /* the error (out of memory) is set */
    size_t size = strlen(shortest);
    int same = (size == (size_t)length && memcmp(shortest, text, size) == 0) ||
               (size == (size_t)length + 2 && memcmp(shortest + length, ".0", 2) == 0 &&
                memcmp(shortest, text, (size_t)length) == 0);
    int plain = strchr(shortest, 'e') == NULL && strchr(shortest, 'n') == NULL;
    PyMem_Free(shortest);
    if (!same || !plain)
        return NULL;
    uint64_t bits;
    memcpy(&bits, &number, 8);
    unsigned char bytes[8];
    for (int i = 7; i >= 0; i--, bits >>= 8)
        bytes[i] = (unsigned char)(bits & 0xFF);
    return PyBytes_FromStringAndSize((const char *)bytes, 8);
}

/* specialise._INLINE's tests and bytes for utf8, decimal, int64 and bool. */
static PyObject *scalar_encoded(PyObject *value, long kind) {
    PyObject *tag, *payload;
    if (!tag_of(value, &tag, &payload))
        return NULL;
    if (kind == 0) {
        if (PyUnicode_CompareWithASCIIString(tag, "S") != 0)
            return NULL;
        return utf8_of(payload);
    }
    if (kind == 3) {
        if (PyUnicode_CompareWithASCIIString(tag, "BOOL") != 0 || (payload != Py_True && payload != Py_False))
            return NULL;
        return PyBytes_FromStringAndSize(payload == Py_True ? "\x01" : "\x00", 1);
    }
    if (PyUnicode_CompareWithASCIIString(tag, "N") != 0)
        return NULL;
    Py_ssize_t length;
    const char *text = ascii_of(payload, &length);
    if (text == NULL)
        return NULL;
    if (kind == 1)
        return canonical_number(text, length) ? PyBytes_FromStringAndSize(text, length) : NULL;
    /* int64: 1 to 18 ASCII digits (below 10**18: always fits), as 8 big-endian bytes */
    if (length < 1 || length > 18)
        return NULL;
    uint64_t number = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        if (text[i] < '0' || text[i] > '9')
            return NULL;
        number = number * 10 + (uint64_t)(text[i] - '0');
    }
    unsigned char bytes[8];
    for (int i = 7; i >= 0; i--, number >>= 8)
        bytes[i] = (unsigned char)(number & 0xFF);
    return PyBytes_FromStringAndSize((const char *)bytes, 8);
}

/* The kinds of specialise._CELL_KINDS: utf8 0, decimal 1, int64 2, bool 3, float64 4, json 5, auto 6, ddb_json 7. */
static PyObject *encoded(PyObject *value, long kind) {
    switch (kind) {
    case 0: case 1: case 2: case 3: return scalar_encoded(value, kind);
    case 4: return float64_encoded(value);
    case 5: return json_encoded(value, 0);
    case 6: return auto_encoded(value);
    case 7: return json_encoded(value, 1);
    }
    PyErr_Format(PyExc_ValueError, "unknown cell kind %ld", kind);
    return NULL;
}

/* NULL with no error set (not taken) as None. */
static PyObject *or_none(PyObject *result) {
    if (result == NULL && !PyErr_Occurred())
        return Py_NewRef(Py_None);
    return result;
}

static PyObject *json_bytes(PyObject *module, PyObject *value) {
    (void)module;
    return or_none(json_encoded(value, 0));
}

static PyObject *typed_json_bytes(PyObject *module, PyObject *value) {
    (void)module;
    return or_none(json_encoded(value, 1));
}

static PyObject *auto_bytes(PyObject *module, PyObject *value) {
    (void)module;
    return or_none(auto_encoded(value));
}

static PyObject *float64_bytes(PyObject *module, PyObject *value) {
    (void)module;
    return or_none(float64_encoded(value));
}

/* One cell appended to `out`: Cell(family, qualifier, stamp, data), the three first held here, `data` taken. */
static int append_cell(PyObject *out, PyTypeObject *cell_type, PyObject *family, PyObject *qualifier, PyObject *stamp,
                       PyObject *data) {
    PyObject *cell = cell_type->tp_alloc(cell_type, 4);
    if (cell == NULL) {
        Py_DECREF(data);
        return -1;
    }
    PyTuple_SET_ITEM(cell, 0, Py_NewRef(family));
    PyTuple_SET_ITEM(cell, 1, Py_NewRef(qualifier));
    PyTuple_SET_ITEM(cell, 2, Py_NewRef(stamp));
    PyTuple_SET_ITEM(cell, 3, data);
    int done = PyList_Append(out, cell) < 0 ? -1 : 1;
    Py_DECREF(cell);
    return done;
}

/* prefix + text's UTF-8 (an exact str), NULL (no error set) for anything else. */
static PyObject *prefixed(PyObject *prefix, PyObject *text) {
    if (!PyUnicode_CheckExact(text))
        return NULL;
    Py_ssize_t length;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &length);
    if (utf8 == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeEncodeError))
            PyErr_Clear();
        return NULL;
    }
    PyObject *joined = PyBytes_FromStringAndSize(NULL, PyBytes_GET_SIZE(prefix) + length);
    if (joined == NULL)
        return NULL;
    memcpy(PyBytes_AS_STRING(joined), PyBytes_AS_STRING(prefix), (size_t)PyBytes_GET_SIZE(prefix));
    memcpy(PyBytes_AS_STRING(joined) + PyBytes_GET_SIZE(prefix), utf8, (size_t)length);
    return joined;
}

typedef struct {
    PyObject *out, *family, *qualifier, *ts;
    PyTypeObject *cell_type;
    long kind;
    Py_ssize_t qualifier_max;
    long long timestamp_max;
    Py_ssize_t size;
} Column;

/* specialise._sets's SS and NS lines: a member per cell at prefix + member (a str's UTF-8, a canonical number's
 * text), value b"\x00"; kind 0 takes SS and NS, 1 SS only, 2 NS only. Duplicate members: not taken (the lines
 * return None). */
static int set_cells(Column *column, PyObject *tag, PyObject *payload) {
    int number = PyUnicode_CompareWithASCIIString(tag, "NS") == 0;
    if (!number && PyUnicode_CompareWithASCIIString(tag, "SS") != 0)
        return 0;
    if ((number && column->kind == 1) || (!number && column->kind == 2))
        return 0;
    if (!PyList_CheckExact(payload) || PyList_GET_SIZE(payload) == 0)
        return 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(payload); i++) {
        PyObject *member = PyList_GET_ITEM(payload, i); /* the list is held (its value is); nothing here runs Python */
        if (number) {
            Py_ssize_t length;
            const char *text = ascii_of(member, &length);
            if (text == NULL || !canonical_number(text, length))
                return 0;
        }
        PyObject *q = prefixed(column->qualifier, member);
        if (q == NULL)
            return PyErr_Occurred() ? -1 : 0;
        if (PyBytes_GET_SIZE(q) > column->qualifier_max) {
            Py_DECREF(q);
            return 0;
        }
        column->size += PyBytes_GET_SIZE(q) + 1;
        PyObject *zero = PyBytes_FromStringAndSize("\x00", 1);
        int done = zero == NULL ? -1 : append_cell(column->out, column->cell_type, column->family, q, column->ts, zero);
        Py_DECREF(q);
        if (done != 1)
            return done;
    }
    PyObject *distinct = PySet_New(payload); /* exact str members: hashing and comparing them runs no Python code */
    if (distinct == NULL)
        return -1;
    int unique = PySet_GET_SIZE(distinct) == PyList_GET_SIZE(payload);
    Py_DECREF(distinct);
    return unique;
}

/* specialise._collection's map lines: a cell per entry at prefix + name, the element encoded as the column's kind, in
 * the dict's order; a name "" whose value encodes to no bytes, or a long qualifier: not taken. */
static int map_cells(Column *column, PyObject *tag, PyObject *payload) {
    if (PyUnicode_CompareWithASCIIString(tag, "M") != 0 || !PyDict_CheckExact(payload) || PyDict_GET_SIZE(payload) == 0)
        return 0;
    Py_ssize_t size = PyDict_GET_SIZE(payload);
    PyObject *entries = PyDict_Items(payload); /* held: encoding may collect, and a finalizer could change the dict */
    if (entries == NULL)
        return -1;
    int done = PyList_GET_SIZE(entries) == size; /* changed while its items were taken: the lines answer */
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(entries) && done == 1; i++) {
        PyObject *entry = PyList_GET_ITEM(entries, i);
        PyObject *name = PyTuple_GET_ITEM(entry, 0), *element = PyTuple_GET_ITEM(entry, 1);
        PyObject *data = encoded(element, column->kind);
        if (data == NULL) {
            done = PyErr_Occurred() ? -1 : 0;
            break;
        }
        PyObject *q = prefixed(column->qualifier, name);
        if (q == NULL || PyBytes_GET_SIZE(q) > column->qualifier_max ||
            (PyBytes_GET_SIZE(data) == 0 && PyUnicode_GET_LENGTH(name) == 0)) {
            done = q == NULL && PyErr_Occurred() ? -1 : 0;
            Py_XDECREF(q);
            Py_DECREF(data);
            break;
        }
        column->size += PyBytes_GET_SIZE(q) + PyBytes_GET_SIZE(data);
        done = append_cell(column->out, column->cell_type, column->family, q, column->ts, data);
        Py_DECREF(q);
    }
    Py_DECREF(entries);
    return done;
}

/* specialise._collection's list lines: a cell per element at the qualifier, a millisecond apart from ts. */
static int list_cells(Column *column, PyObject *tag, PyObject *payload) {
    if (PyUnicode_CompareWithASCIIString(tag, "L") != 0 || !PyList_CheckExact(payload) || PyList_GET_SIZE(payload) == 0)
        return 0;
    int overflow = 0;
    long long at = PyLong_CheckExact(column->ts) ? PyLong_AsLongLongAndOverflow(column->ts, &overflow) : -1;
    if (at == -1 && PyErr_Occurred())
        return -1;
    Py_ssize_t count = PyList_GET_SIZE(payload);
    if (overflow || at < 0 || at > column->timestamp_max || count > 1000000 ||
        at + (long long)(count - 1) * 1000 > column->timestamp_max)
        return 0;
    PyObject *elements = PyList_GetSlice(payload, 0, count); /* held: encoding may collect and change the list */
    if (elements == NULL)
        return -1;
    int done = PyList_GET_SIZE(elements) == count;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(elements) && done == 1; i++) {
        PyObject *data = encoded(PyList_GET_ITEM(elements, i), column->kind);
        if (data == NULL) {
            done = PyErr_Occurred() ? -1 : 0;
            break;
        }
        PyObject *stamp = PyLong_FromLongLong(at + (long long)i * 1000);
        if (stamp == NULL) {
            Py_DECREF(data);
            done = -1;
            break;
        }
        column->size += PyBytes_GET_SIZE(data) + PyBytes_GET_SIZE(column->qualifier);
        done = append_cell(column->out, column->cell_type, column->family, column->qualifier, stamp, data);
        Py_DECREF(stamp);
    }
    Py_DECREF(elements);
    return done;
}

/* cells(item, program, ts, cells): a run of a specialised map function's columns at literal qualifiers with the
 * entity's timestamp, as its lines make them. `program` is (Cell, qualifier_max, timestamp_max, column, ...), each
 * column (attribute, kind, family, qualifier, required, layout): layout 0 one cell (kind: utf8 0, decimal 1, int64 2,
 * bool 3, float64 4, json 5, auto 6, ddb_json 7), 1 a set (kind 0 SS or NS, 1 SS, 2 NS), 2 a map and 3 a list (kind:
 * the elements'). For each column whose attribute the item has, its cells are appended to `cells`; the answer is
 * their bytes (qualifiers and values). None, with `cells` as it was: a required attribute missing or a value the
 * run does not take here (another type, an odd payload, a duplicate, a limit); the function's own lines answer. */
static PyObject *cells(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "cells(item, program, ts, cells)");
        return NULL;
    }
    PyObject *item = args[0], *program = args[1];
    if (!PyTuple_CheckExact(program) || PyTuple_GET_SIZE(program) < 3 || !PyType_Check(PyTuple_GET_ITEM(program, 0)) ||
        !PyType_IsSubtype((PyTypeObject *)PyTuple_GET_ITEM(program, 0), &PyTuple_Type) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(program, 1)) || !PyLong_CheckExact(PyTuple_GET_ITEM(program, 2)) ||
        !PyList_CheckExact(args[3])) {
        PyErr_SetString(PyExc_TypeError, "cells: program is (Cell, qualifier_max, timestamp_max, column, ...), cells a list");
        return NULL;
    }
    Column column = {args[3], NULL, NULL, args[2], (PyTypeObject *)PyTuple_GET_ITEM(program, 0), 0,
                     PyLong_AsSsize_t(PyTuple_GET_ITEM(program, 1)), PyLong_AsLongLong(PyTuple_GET_ITEM(program, 2)), 0};
    if (PyErr_Occurred())
        return NULL;
    if (!PyDict_CheckExact(item))
        return Py_NewRef(Py_None);
    Py_ssize_t start = PyList_GET_SIZE(column.out);
    int done = 1;
    for (Py_ssize_t i = 3; i < PyTuple_GET_SIZE(program) && done == 1; i++) {
        PyObject *spec = PyTuple_GET_ITEM(program, i);
        if (!PyTuple_CheckExact(spec) || PyTuple_GET_SIZE(spec) != 6 || !PyBytes_CheckExact(PyTuple_GET_ITEM(spec, 3)) ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(spec, 1)) || !PyBool_Check(PyTuple_GET_ITEM(spec, 4)) ||
            !PyLong_CheckExact(PyTuple_GET_ITEM(spec, 5))) {
            PyErr_SetString(PyExc_TypeError, "cells: a column is (attribute, kind, family, qualifier, required, layout)");
            done = -1;
            break;
        }
        long layout = PyLong_AsLong(PyTuple_GET_ITEM(spec, 5));
        column.kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
        column.family = PyTuple_GET_ITEM(spec, 2);
        column.qualifier = PyTuple_GET_ITEM(spec, 3);
        if (PyErr_Occurred()) {
            done = -1;
            break;
        }
        PyObject *value = PyDict_GetItemWithError(item, PyTuple_GET_ITEM(spec, 0));
        if (value == NULL) {
            if (PyErr_Occurred())
                done = -1;
            else if (PyTuple_GET_ITEM(spec, 4) == Py_True)
                done = 0;
            continue;
        }
        Py_INCREF(value); /* held: a key's comparison may have run Python code, and encoding may collect */
        if (layout == 0) {
            PyObject *data = encoded(value, column.kind);
            if (data == NULL)
                done = PyErr_Occurred() ? -1 : 0;
            else {
                column.size += PyBytes_GET_SIZE(data) + PyBytes_GET_SIZE(column.qualifier);
                done = append_cell(column.out, column.cell_type, column.family, column.qualifier, column.ts, data);
            }
        } else {
            PyObject *tag, *payload;
            if (!tag_of(value, &tag, &payload))
                done = 0;
            else {
                Py_INCREF(tag);
                Py_INCREF(payload);
                if (layout == 1)
                    done = set_cells(&column, tag, payload);
                else if (layout == 2)
                    done = map_cells(&column, tag, payload);
                else if (layout == 3)
                    done = list_cells(&column, tag, payload);
                else {
                    PyErr_Format(PyExc_ValueError, "cells: unknown layout %ld", layout);
                    done = -1;
                }
                Py_DECREF(payload);
                Py_DECREF(tag);
            }
        }
        Py_DECREF(value);
    }
    if (done == 1)
        return PyLong_FromSsize_t(column.size);
    if (PyList_GET_SIZE(column.out) > start && PyList_SetSlice(column.out, start, PyList_GET_SIZE(column.out), NULL) < 0)
        return NULL;
    return done == 0 ? Py_NewRef(Py_None) : NULL;
}

/* An object the collector never needs to walk: it refers to no other object (exact str, bytes or int). */
static int is_atom(PyObject *value) {
    return PyUnicode_CheckExact(value) || PyBytes_CheckExact(value) || PyLong_CheckExact(value);
}

/* A tuple, or a subclass of it with the tuple's own layout (no __dict__, no slot: a NamedTuple such as Cell), whose
 * items are all atoms: it refers to nothing but atoms and its class, so the collector need not walk it. (An instance
 * of a class statement's type also refers to that type: a cycle through the class, one whose attributes hold its
 * own instances, would go uncollected; Cell and MappedRow hold none.) CPython untracks an exact tuple of atoms at the
 * first collection that sees it, never a subclass's instance. */
static int holds_atoms_only(PyObject *value) {
    PyTypeObject *type = Py_TYPE(value);
    if (!PyTuple_Check(value) || (type != &PyTuple_Type && !python_tuple_subclass(type))
            || type->tp_basicsize != PyTuple_Type.tp_basicsize || type->tp_dictoffset != 0)
        return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(value); i++)
        if (!is_atom(PyTuple_GET_ITEM(value, i)))
            return 0;
    return 1;
}

static void untrack(PyObject *value) {
    if (PyObject_GC_IsTracked(value))
        PyObject_GC_UnTrack(value);
}

/* specialise's last line, `new(MappedRow, (key, tuple(cells), entity, (), ()))`, the same value, with the tuples the
 * collector need not walk taken off its lists: each cell whose items are atoms (str, bytes, int: every cell a
 * specialised function makes), the cells' tuple when every cell is one, the row when its key is bytes and its entity
 * a str too. A row waits for its batch to be written, and every young collection meanwhile walked its ~10 cells to
 * find nothing (docs/PERFORMANCE.md, "Own CPU round 11"). Untracked, they are freed by reference counting as before.
 * None (no error) for a row type that is not a tuple of the tuple's own layout or cells that are not a list. */
static PyObject *row(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "row(row_type, key, cells, entity)");
        return NULL;
    }
    PyObject *row_type = args[0], *key = args[1], *cells = args[2], *entity = args[3];
    if (!PyType_Check(row_type) || !PyType_IsSubtype((PyTypeObject *)row_type, &PyTuple_Type) ||
        ((PyTypeObject *)row_type)->tp_basicsize != PyTuple_Type.tp_basicsize ||
        ((PyTypeObject *)row_type)->tp_dictoffset != 0 || !PyList_CheckExact(cells) ||
        ((PyTypeObject *)row_type != &PyTuple_Type && !python_tuple_subclass((PyTypeObject *)row_type)))
        return Py_NewRef(Py_None);
    PyObject *all = PyList_AsTuple(cells);
    if (all == NULL)
        return NULL;
    int atoms = 1;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(all); i++) {
        PyObject *cell = PyTuple_GET_ITEM(all, i);
        if (holds_atoms_only(cell))
            untrack(cell);
        else
            atoms = 0;
    }
    if (atoms)
        untrack(all);
    PyObject *none = PyTuple_New(0);
    if (none == NULL) {
        Py_DECREF(all);
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)row_type;
    PyObject *made = type->tp_alloc(type, 5);
    if (made == NULL) {
        Py_DECREF(all);
        Py_DECREF(none);
        return NULL;
    }
    PyTuple_SET_ITEM(made, 0, Py_NewRef(key));
    PyTuple_SET_ITEM(made, 1, all);
    PyTuple_SET_ITEM(made, 2, Py_NewRef(entity));
    PyTuple_SET_ITEM(made, 3, Py_NewRef(none));
    PyTuple_SET_ITEM(made, 4, none);
    if (atoms && PyBytes_CheckExact(key) && PyUnicode_CheckExact(entity) && !PyObject_GC_IsTracked(none))
        untrack(made);
    return made;
}

static PyMethodDef methods[] = {
    {"json_bytes", (PyCFunction)json_bytes, METH_O,
     "json_bytes(value) -> bytes | None: encodings._json_text(value).encode() for the values it takes, else None."},
    {"typed_json_bytes", (PyCFunction)typed_json_bytes, METH_O,
     "typed_json_bytes(value) -> bytes | None: encodings.encode_ddb_json(value) for the values it takes, else None."},
    {"auto_bytes", (PyCFunction)auto_bytes, METH_O,
     "auto_bytes(value) -> bytes | None: encodings.encode_auto(value) for the values it takes, else None."},
    {"float64_bytes", (PyCFunction)float64_bytes, METH_O,
     "float64_bytes(value) -> bytes | None: the float64 encoding's bytes of a shortest float text, else None."},
    {"cells", (PyCFunction)(void (*)(void))cells, METH_FASTCALL,
     "cells(item, program, ts, cells) -> int | None: a specialised map function's run of one-cell columns."},
    {"row", (PyCFunction)(void (*)(void))row, METH_FASTCALL,
     "row(row_type, key, cells, entity) -> row | None: a specialised map function's row, its atoms-only tuples "
     "untracked."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_json", NULL, 0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__json(void) {
    if (tuple_subclass_probe() < 0)
        return NULL;
    return PyModule_Create(&module);
}
