/* A DynamoDB value as plain JSON's UTF-8 bytes: the compiled twin of encodings._json_text(value).encode() for the
 * values it takes (docs/PERFORMANCE.md, "JSON cells compiled").
 *
 * json_bytes(value) -> bytes | None
 *
 * S (a str, escaped as json.encoder.encode_basestring escapes it), N (a str already canonical decimal text, as
 * attrvalue.is_canonical_number says), BOOL (True or False), NULL, L (a list) and M (a dict of str keys, in sorted
 * order), nested to at most 65 levels (64 L or M around a scalar). Anything else gives None and the Python function answers: a number that is
 * not canonical text, B and sets, a payload of another type, a string that is not UTF-8 (a lone surrogate), keys that
 * are not str. So every value's bytes are the Python function's (tests/mappers/test_json_compiled.py), and every
 * refusal is said in one place.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

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

static int put_value_held(Buffer *out, PyObject *tag, PyObject *payload, int depth);

/* 1: written; 0: not taken (the Python function answers); -1: an error (out of memory).
 * The value's tag and payload are held while they are written: a list made on the way (a map's keys) may start a
 * garbage collection, whose finalizers could change the value under borrowed references (Python 3.10, 3.11). */
static int put_value(Buffer *out, PyObject *value, int depth) {
    if (depth > 64 || !PyDict_CheckExact(value) || PyDict_GET_SIZE(value) != 1)
        return 0;
    Py_ssize_t position = 0;
    PyObject *tag, *payload;
    PyDict_Next(value, &position, &tag, &payload);
    if (!PyUnicode_CheckExact(tag))
        return 0;
    Py_INCREF(tag);
    Py_INCREF(payload);
    int done = put_value_held(out, tag, payload, depth);
    Py_DECREF(payload);
    Py_DECREF(tag);
    return done;
}

static int put_value_held(Buffer *out, PyObject *tag, PyObject *payload, int depth) {
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
        return put(out, text, (size_t)length) ? 1 : -1;
    }
    if (PyUnicode_CompareWithASCIIString(tag, "BOOL") == 0) {
        if (payload == Py_True)
            return put(out, "true", 4) ? 1 : -1;
        if (payload == Py_False)
            return put(out, "false", 5) ? 1 : -1;
        return 0;
    }
    if (PyUnicode_CompareWithASCIIString(tag, "NULL") == 0)
        return put(out, "null", 4) ? 1 : -1;
    if (PyUnicode_CompareWithASCIIString(tag, "L") == 0) {
        if (!PyList_CheckExact(payload))
            return 0;
        if (!put(out, "[", 1))
            return -1;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(payload); i++) {
            if (i && !put(out, ",", 1))
                return -1;
            int done = put_value(out, PyList_GET_ITEM(payload, i), depth + 1); /* held by put_value before any allocation */
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
                done = inner == NULL ? (PyErr_Occurred() ? -1 : 0) : put_value(out, inner, depth + 1);
            }
        }
        Py_DECREF(names);
        if (done == 1 && !put(out, "}", 1))
            done = -1;
        return done;
    }
    return 0;
}

static PyObject *json_bytes(PyObject *module, PyObject *value) {
    (void)module;
    Buffer out = {NULL, 0, 0};
    int done = put_value(&out, value, 0);
    PyObject *result = NULL;
    if (done == 1)
        result = PyBytes_FromStringAndSize(out.data, (Py_ssize_t)out.size);
    else if (done == 0)
        result = Py_NewRef(Py_None);
    else if (!PyErr_Occurred())
        PyErr_NoMemory();
    PyMem_Free(out.data);
    return result;
}

static PyMethodDef methods[] = {
    {"json_bytes", (PyCFunction)json_bytes, METH_O,
     "json_bytes(value) -> bytes | None: encodings._json_text(value).encode() for the values it takes, else None."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_json", NULL, 0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__json(void) { return PyModule_Create(&module); }
