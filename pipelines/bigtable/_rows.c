/* A ReadRows answer's rows, read straight from its serialized ReadRowsResponse bytes: the compiled twin of parsing
 * them with protobuf and merging the chunks with chunks._merge (docs/PERFORMANCE.md, "Validate round 10").
 *
 * response_rows(data, cell) -> {row key: [cell, ...]} | None
 *
 * data is one or more serialized ReadRowsResponse messages joined (repeated fields concatenate: their chunks in
 * order); cell the tuple subclass each cell is made as (mappers.results.Cell: family, qualifier, timestamp, value).
 * The chunks are merged by exactly the rules of chunks._merge (a row key starts a row, a qualifier changes the
 * column and a non-empty family with it, value_size > 0 announces that the value goes on in the next chunks, whose
 * timestamp is the first's, reset_row drops the row so far, commit_row ends it), in any layout a server lays them
 * out: several rows per response, the row key, family and qualifier left out where they do not change, labels, a
 * value over many chunks, fields protobuf does not know. Where parsing the bytes with protobuf would fail, or the
 * merge would raise (a chunk with no row key, a new row key in an uncommitted row, chunks that end inside a row),
 * and for what is rare enough not to be worth a second reading here (request_stats, a field repeated where it
 * should not be, groups), it gives None and the Python functions answer, with their errors: the same bytes, the
 * same rows (tests/pipelines/test_bigtable_rows.py, against protobuf's own serialization).
 *
 * range_rows(data, cell, family, qualifier) -> (rows, read, family, qualifier) | None
 *
 * The same merge for a range read, whose answer comes in groups of responses and whose rows may span two groups
 * (chunks.range_rows): it starts between rows with the family and qualifier the merge carries over from the group
 * before, gives the committed rows in order as a list of (row key, cells), and, where the data ends inside a row,
 * no refusal: `read` is how many bytes it read up to the last point between rows (between two fields of a response
 * or two responses), and family and qualifier those there; the caller reads the rest again with the next group.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_tuple_subclass.h" /* python_tuple_subclass, tuple_subclass_probe */

#define ODD 0   /* the Python functions answer */
#define OK 1
#define FAILED -1 /* an exception is set (memory) */

typedef const unsigned char *Ptr;

/* A varint of at most ten bytes whose value fits 64 bits; 0 where protobuf might read it otherwise. */
static int read_varint(Ptr *at, Ptr end, uint64_t *out) {
    Ptr p = *at;
    uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (p >= end)
            return 0;
        unsigned char byte = *p++;
        if (shift == 63 && byte > 1)
            return 0;
        value |= (uint64_t)(byte & 0x7F) << shift;
        if (!(byte & 0x80)) {
            *at = p;
            *out = value;
            return 1;
        }
    }
    return 0;
}

/* A field's tag: its number (>= 1) and wire type; 0 for a tag protobuf would refuse (or might). */
static int read_tag(Ptr *at, Ptr end, uint32_t *number, unsigned *wire) {
    uint64_t tag;
    Ptr start = *at;
    if (!read_varint(at, end, &tag) || *at - start > 5 || tag > UINT32_MAX || (tag >> 3) == 0)
        return 0;
    *number = (uint32_t)(tag >> 3);
    *wire = (unsigned)(tag & 7);
    return 1;
}

/* A length-delimited field's bytes. */
static int read_bytes(Ptr *at, Ptr end, Ptr *data, Py_ssize_t *size) {
    uint64_t length;
    if (!read_varint(at, end, &length) || length > (uint64_t)(end - *at))
        return 0;
    *data = *at;
    *size = (Py_ssize_t)length;
    *at += length;
    return 1;
}

/* Past a field protobuf does not know (kept as an unknown field, its bytes unread); groups are left to protobuf. */
static int skip_field(Ptr *at, Ptr end, unsigned wire) {
    uint64_t ignored;
    Ptr data;
    Py_ssize_t size;
    switch (wire) {
    case 0:
        return read_varint(at, end, &ignored);
    case 1:
        if (end - *at < 8)
            return 0;
        *at += 8;
        return 1;
    case 2:
        return read_bytes(at, end, &data, &size);
    case 5:
        if (end - *at < 4)
            return 0;
        *at += 4;
        return 1;
    default:
        return 0;
    }
}

/* A google.protobuf.StringValue or BytesValue: its value (field 1; absent: empty). */
static int read_wrapper(Ptr data, Py_ssize_t size, Ptr *value, Py_ssize_t *value_size) {
    Ptr at = data, end = data + size;
    int seen = 0;
    *value = data;
    *value_size = 0;
    while (at < end) {
        uint32_t number;
        unsigned wire;
        if (!read_tag(&at, end, &number, &wire))
            return 0;
        if (number == 1) {
            if (wire != 2 || seen++ || !read_bytes(&at, end, value, value_size))
                return 0;
        } else if (!skip_field(&at, end, wire)) {
            return 0;
        }
    }
    return 1;
}

/* Whether bytes are UTF-8 as protobuf requires of a proto3 string (Python's strict decoder is as strict). */
static int utf8(Ptr data, Py_ssize_t size) {
    for (Py_ssize_t i = 0; i < size; i++) {
        if (data[i] & 0x80) {
            PyObject *text = PyUnicode_DecodeUTF8((const char *)data, size, NULL);
            if (text == NULL) {
                PyErr_Clear();
                return 0;
            }
            Py_DECREF(text);
            return 1;
        }
    }
    return 1;
}

typedef struct {
    Ptr row_key, family, qualifier, value;
    Py_ssize_t row_key_size, family_size, qualifier_size, value_size_bytes;
    int has_family, has_qualifier;
    int64_t timestamp;
    int32_t value_size;
    int reset_row, commit_row;
} Chunk;

enum { F_ROW_KEY = 1, F_FAMILY = 2, F_QUALIFIER = 4, F_TIMESTAMP = 8, F_VALUE = 16, F_VALUE_SIZE = 32, F_STATUS = 64 };

/* A CellChunk's fields as protobuf reads them; 0 for anything odd (a field twice, a wrong wire type, bad UTF-8). */
static int read_chunk(Ptr data, Py_ssize_t size, Chunk *chunk) {
    Ptr at = data, end = data + size;
    unsigned seen = 0;
    memset(chunk, 0, sizeof(*chunk));
    chunk->row_key = chunk->family = chunk->qualifier = chunk->value = data;
    while (at < end) {
        uint32_t number;
        unsigned wire, field = 0;
        uint64_t n;
        Ptr bytes;
        Py_ssize_t length;
        if (!read_tag(&at, end, &number, &wire))
            return 0;
        switch (number) {
        case 1: /* row_key */
            field = F_ROW_KEY;
            if (wire != 2 || !read_bytes(&at, end, &chunk->row_key, &chunk->row_key_size))
                return 0;
            break;
        case 2: /* family_name */
            field = F_FAMILY;
            if (wire != 2 || !read_bytes(&at, end, &bytes, &length)
                    || !read_wrapper(bytes, length, &chunk->family, &chunk->family_size))
                return 0;
            chunk->has_family = 1;
            break;
        case 3: /* qualifier */
            field = F_QUALIFIER;
            if (wire != 2 || !read_bytes(&at, end, &bytes, &length)
                    || !read_wrapper(bytes, length, &chunk->qualifier, &chunk->qualifier_size))
                return 0;
            chunk->has_qualifier = 1;
            break;
        case 4: /* timestamp_micros: an int64 */
            field = F_TIMESTAMP;
            if (wire != 0 || !read_varint(&at, end, &n))
                return 0;
            chunk->timestamp = (int64_t)n;
            break;
        case 5: /* labels: repeated strings, which the merge does not keep */
            if (wire != 2 || !read_bytes(&at, end, &bytes, &length) || !utf8(bytes, length))
                return 0;
            break;
        case 6: /* value */
            field = F_VALUE;
            if (wire != 2 || !read_bytes(&at, end, &chunk->value, &chunk->value_size_bytes))
                return 0;
            break;
        case 7: /* value_size: an int32 (its varint's low 32 bits) */
            field = F_VALUE_SIZE;
            if (wire != 0 || !read_varint(&at, end, &n))
                return 0;
            chunk->value_size = (int32_t)(uint32_t)n;
            break;
        case 8: /* reset_row, in a oneof with commit_row */
        case 9:
            field = F_STATUS;
            if (wire != 0 || !read_varint(&at, end, &n))
                return 0;
            if (number == 8)
                chunk->reset_row = n != 0;
            else
                chunk->commit_row = n != 0;
            break;
        default:
            if (!skip_field(&at, end, wire))
                return 0;
        }
        if (field & seen)
            return 0; /* protobuf keeps the last (or merges the messages): rare enough to leave to it */
        seen |= field;
    }
    if (chunk->has_family && !utf8(chunk->family, chunk->family_size))
        return 0;
    return 1;
}

/* The merge's objects, made once per distinct family, qualifier and timestamp where they repeat. */
#define FAMILIES 16
#define QUALIFIERS 256

typedef struct {
    PyTypeObject *cell_type;
    PyObject *rows;      /* the answer: row key -> cells */
    PyObject *cells;     /* the open row's */
    PyObject *row_key;   /* bytes: b"" between rows */
    PyObject *family;    /* str */
    PyObject *qualifier; /* bytes */
    PyObject *stamp;     /* int: the open value's timestamp */
    int64_t stamp_value;
    Ptr *parts;          /* a value over several chunks: its pieces */
    Py_ssize_t *part_sizes;
    Py_ssize_t part_count, part_room; /* part_count -1: no value is open */
    struct { Ptr data; Py_ssize_t size; PyObject *text; } families[FAMILIES];
    int family_count;
    struct { Ptr data; Py_ssize_t size; PyObject *bytes; } qualifiers[QUALIFIERS];
    /* range_rows: the committed rows in order, as (row key, cells), and the last point between rows */
    PyObject *row_list;
    Py_ssize_t safe;         /* bytes read up to it */
    PyObject *safe_family;   /* the family and qualifier there: the merge carries them into the next row */
    PyObject *safe_qualifier;
} Merge;

static PyObject *family_of(Merge *m, Ptr data, Py_ssize_t size) {
    for (int i = 0; i < m->family_count; i++)
        if (m->families[i].size == size && memcmp(m->families[i].data, data, (size_t)size) == 0)
            return Py_NewRef(m->families[i].text);
    PyObject *text = PyUnicode_DecodeUTF8((const char *)data, size, NULL); /* valid: read_chunk checked it */
    if (text != NULL && m->family_count < FAMILIES) {
        m->families[m->family_count].data = data;
        m->families[m->family_count].size = size;
        m->families[m->family_count].text = Py_NewRef(text);
        m->family_count++;
    }
    return text;
}

static PyObject *qualifier_of(Merge *m, Ptr data, Py_ssize_t size) {
    uint32_t hash = 2166136261u ^ (uint32_t)size;
    for (Py_ssize_t i = 0; i < size && i < 32; i++)
        hash = (hash ^ data[i]) * 16777619u;
    unsigned slot = (hash ^ (hash >> 16)) % QUALIFIERS;
    PyObject *kept = m->qualifiers[slot].bytes;
    if (kept != NULL && m->qualifiers[slot].size == size && memcmp(m->qualifiers[slot].data, data, (size_t)size) == 0)
        return Py_NewRef(kept);
    PyObject *bytes = PyBytes_FromStringAndSize((const char *)data, size);
    if (bytes != NULL) {
        Py_XSETREF(m->qualifiers[slot].bytes, Py_NewRef(bytes));
        m->qualifiers[slot].data = data;
        m->qualifiers[slot].size = size;
    }
    return bytes;
}

/* The cell (family, qualifier, stamp, value) as a `cell_type`, made as tuple.__new__ makes a tuple subclass's. */
static int add_cell(Merge *m, PyObject *value) {
    PyObject *cell = m->cell_type->tp_alloc(m->cell_type, 4);
    if (cell == NULL) {
        Py_DECREF(value);
        return FAILED;
    }
    PyTuple_SET_ITEM(cell, 0, Py_NewRef(m->family));
    PyTuple_SET_ITEM(cell, 1, Py_NewRef(m->qualifier));
    PyTuple_SET_ITEM(cell, 2, Py_NewRef(m->stamp));
    PyTuple_SET_ITEM(cell, 3, value);
    /* Its items are a str, bytes and an int: it can be part of no reference cycle (its class holds no cell), so the
     * collector need not walk it, as it stops walking a plain tuple of such items once it has looked at it once. */
    PyObject_GC_UnTrack(cell);
    int added = PyList_Append(m->cells, cell);
    Py_DECREF(cell);
    return added < 0 ? FAILED : OK;
}

static int add_part(Merge *m, Ptr data, Py_ssize_t size) {
    if (m->part_count == m->part_room) {
        Py_ssize_t room = m->part_room ? m->part_room * 2 : 8;
        Ptr *parts = PyMem_Realloc(m->parts, (size_t)room * sizeof(Ptr));
        if (parts == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        m->parts = parts;
        Py_ssize_t *sizes = PyMem_Realloc(m->part_sizes, (size_t)room * sizeof(Py_ssize_t));
        if (sizes == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
        m->part_sizes = sizes;
        m->part_room = room;
    }
    m->parts[m->part_count] = data;
    m->part_sizes[m->part_count] = size;
    m->part_count++;
    return OK;
}

static PyObject *joined_parts(Merge *m) {
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < m->part_count; i++) {
        if (m->part_sizes[i] > PY_SSIZE_T_MAX - total) {
            PyErr_NoMemory();
            return NULL;
        }
        total += m->part_sizes[i];
    }
    PyObject *value = PyBytes_FromStringAndSize(NULL, total);
    if (value == NULL)
        return NULL;
    char *out = PyBytes_AS_STRING(value);
    for (Py_ssize_t i = 0; i < m->part_count; i++) {
        memcpy(out, m->parts[i], (size_t)m->part_sizes[i]);
        out += m->part_sizes[i];
    }
    m->part_count = -1;
    return value;
}

static int new_row(Merge *m) {
    Py_XSETREF(m->cells, PyList_New(0));
    Py_XSETREF(m->row_key, PyBytes_FromStringAndSize(NULL, 0));
    return m->cells != NULL && m->row_key != NULL ? OK : FAILED;
}

/* One chunk through chunks._merge's rules, step for step. */
static int merge_chunk(Merge *m, const Chunk *chunk) {
    if (chunk->reset_row) {
        m->part_count = -1;
        return new_row(m);
    }
    if (chunk->row_key_size) {
        Py_ssize_t open = PyBytes_GET_SIZE(m->row_key);
        int same = open == chunk->row_key_size
                   && memcmp(PyBytes_AS_STRING(m->row_key), chunk->row_key, (size_t)open) == 0;
        if (PyList_GET_SIZE(m->cells) && !same)
            return ODD; /* a new row key before the row was committed: the merge raises */
        if (!same) {
            PyObject *key = PyBytes_FromStringAndSize((const char *)chunk->row_key, chunk->row_key_size);
            if (key == NULL)
                return FAILED;
            Py_SETREF(m->row_key, key);
        }
    } else if (!PyBytes_GET_SIZE(m->row_key)) {
        return ODD; /* a chunk with no row key: the merge raises */
    }
    if (chunk->has_qualifier) {
        if (chunk->family_size) {
            PyObject *family = family_of(m, chunk->family, chunk->family_size);
            if (family == NULL)
                return FAILED;
            Py_SETREF(m->family, family);
        }
        PyObject *qualifier = qualifier_of(m, chunk->qualifier, chunk->qualifier_size);
        if (qualifier == NULL)
            return FAILED;
        Py_SETREF(m->qualifier, qualifier);
    }
    PyObject *value;
    if (m->part_count < 0) {
        if (chunk->timestamp != m->stamp_value) {
            PyObject *stamp = PyLong_FromLongLong(chunk->timestamp);
            if (stamp == NULL)
                return FAILED;
            Py_SETREF(m->stamp, stamp);
            m->stamp_value = chunk->timestamp;
        }
        if (chunk->value_size > 0) {
            m->part_count = 0;
            return add_part(m, chunk->value, chunk->value_size_bytes);
        }
        value = PyBytes_FromStringAndSize((const char *)chunk->value, chunk->value_size_bytes);
    } else {
        if (add_part(m, chunk->value, chunk->value_size_bytes) < 0)
            return FAILED;
        if (chunk->value_size > 0)
            return OK;
        value = joined_parts(m);
    }
    if (value == NULL || add_cell(m, value) < 0)
        return FAILED;
    if (chunk->commit_row) {
        if (m->row_list != NULL) {
            PyObject *row = PyTuple_Pack(2, m->row_key, m->cells);
            if (row == NULL)
                return FAILED;
            int added = PyList_Append(m->row_list, row);
            Py_DECREF(row);
            if (added < 0)
                return FAILED;
        } else if (PyDict_SetItem(m->rows, m->row_key, m->cells) < 0) {
            return FAILED;
        }
        return new_row(m);
    }
    return OK;
}

/* The response's fields: its chunks merged in order, last_scanned_row_key and unknown fields passed over. For
 * range_rows (m->row_list set), each point between two fields where no row is open is noted (m->safe and the family
 * and qualifier there), and the end inside a row is no refusal: what follows the last such point is read again. */
static int merge_response(Merge *m, Ptr at, Ptr end) {
    Ptr start = at;
    while (at < end) {
        uint32_t number;
        unsigned wire;
        Ptr data;
        Py_ssize_t size;
        if (!read_tag(&at, end, &number, &wire))
            return ODD;
        if (number == 1 || number == 2) { /* chunks, last_scanned_row_key */
            if (wire != 2 || !read_bytes(&at, end, &data, &size))
                return ODD;
            if (number == 1) {
                Chunk chunk;
                if (!read_chunk(data, size, &chunk))
                    return ODD;
                int merged = merge_chunk(m, &chunk);
                if (merged != OK)
                    return merged;
            }
        } else if (number == 3) {
            return ODD; /* request_stats (asked for by a request's request_stats_view only): protobuf reads it */
        } else if (!skip_field(&at, end, wire)) {
            return ODD;
        }
        if (m->row_list != NULL && !PyList_GET_SIZE(m->cells) && m->part_count < 0) {
            m->safe = at - start;
            Py_SETREF(m->safe_family, Py_NewRef(m->family));
            Py_SETREF(m->safe_qualifier, Py_NewRef(m->qualifier));
        }
    }
    if (m->row_list == NULL && (PyList_GET_SIZE(m->cells) || m->part_count >= 0))
        return ODD; /* the chunks end inside a row: the merge raises */
    return OK;
}

static int plain_cell_type(PyObject *cell_type, const char *name) {
    if (!PyType_Check(cell_type) || !PyType_IsSubtype((PyTypeObject *)cell_type, &PyTuple_Type)
            || ((PyTypeObject *)cell_type)->tp_basicsize != PyTuple_Type.tp_basicsize
            || ((PyTypeObject *)cell_type)->tp_itemsize != PyTuple_Type.tp_itemsize
            || ((PyTypeObject *)cell_type != &PyTuple_Type && !python_tuple_subclass((PyTypeObject *)cell_type))) {
        PyErr_Format(PyExc_TypeError, "%s: cell must be a tuple subclass with no slots of its own", name);
        return 0;
    }
    return 1;
}

/* Both functions' merge of data: response_rows's (family and qualifier NULL: none yet; rows in a dict) or
 * range_rows's (from the family and qualifier given; rows in a list, the end inside a row allowed). */
static PyObject *merged_rows(PyObject *data, PyObject *cell_type, PyObject *family, PyObject *qualifier) {
    Merge *m = PyMem_Calloc(1, sizeof(Merge));
    if (m == NULL)
        return PyErr_NoMemory();
    PyObject *result = NULL;
    int ranged = family != NULL;
    Py_INCREF(data); /* its buffer is read throughout */
    m->cell_type = (PyTypeObject *)cell_type;
    m->part_count = -1;
    m->stamp = PyLong_FromLong(0);
    if (ranged) {
        m->row_list = PyList_New(0);
        m->family = Py_NewRef(family);
        m->qualifier = Py_NewRef(qualifier);
        m->safe_family = Py_NewRef(family);
        m->safe_qualifier = Py_NewRef(qualifier);
        if (m->row_list == NULL)
            goto done;
    } else {
        m->rows = PyDict_New();
        m->family = PyUnicode_FromStringAndSize(NULL, 0);
        m->qualifier = PyBytes_FromStringAndSize(NULL, 0);
        if (m->rows == NULL)
            goto done;
    }
    if (m->family == NULL || m->qualifier == NULL || m->stamp == NULL || new_row(m) < 0)
        goto done;
    Ptr at = (Ptr)PyBytes_AS_STRING(data);
    int merged = merge_response(m, at, at + PyBytes_GET_SIZE(data));
    if (merged == OK && ranged)
        result = Py_BuildValue("(OnOO)", m->row_list, m->safe, m->safe_family, m->safe_qualifier);
    else if (merged == OK)
        result = Py_NewRef(m->rows);
    else if (merged == ODD)
        result = Py_NewRef(Py_None);
done:
    Py_XDECREF(m->row_list);
    Py_XDECREF(m->safe_family);
    Py_XDECREF(m->safe_qualifier);
    Py_XDECREF(m->rows);
    Py_XDECREF(m->cells);
    Py_XDECREF(m->row_key);
    Py_XDECREF(m->family);
    Py_XDECREF(m->qualifier);
    Py_XDECREF(m->stamp);
    for (int i = 0; i < m->family_count; i++)
        Py_DECREF(m->families[i].text);
    for (int i = 0; i < QUALIFIERS; i++)
        Py_XDECREF(m->qualifiers[i].bytes);
    PyMem_Free(m->parts);
    PyMem_Free(m->part_sizes);
    PyMem_Free(m);
    Py_DECREF(data);
    return result;
}

static PyObject *response_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "response_rows(data, cell)");
        return NULL;
    }
    if (!plain_cell_type(args[1], "response_rows"))
        return NULL;
    if (!PyBytes_CheckExact(args[0]))
        Py_RETURN_NONE;
    return merged_rows(args[0], args[1], NULL, NULL);
}

/* range_rows(data, cell, family, qualifier) -> (rows, read, family, qualifier) | None: see chunks.range_rows. */
static PyObject *range_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "range_rows(data, cell, family, qualifier)");
        return NULL;
    }
    if (!plain_cell_type(args[1], "range_rows"))
        return NULL;
    if (!PyBytes_CheckExact(args[0]) || !PyUnicode_CheckExact(args[2]) || !PyBytes_CheckExact(args[3]))
        Py_RETURN_NONE;
    return merged_rows(args[0], args[1], args[2], args[3]);
}

static PyMethodDef methods[] = {
    {"response_rows", (PyCFunction)(void (*)(void))response_rows, METH_FASTCALL,
     "response_rows(data, cell) -> {row key: [cell, ...]} | None: see chunks.response_rows."},
    {"range_rows", (PyCFunction)(void (*)(void))range_rows, METH_FASTCALL,
     "range_rows(data, cell, family, qualifier) -> (rows, read, family, qualifier) | None: see chunks.range_rows."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rows", NULL, 0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__rows(void) {
    if (tuple_subclass_probe() < 0)
        return NULL;
    return PyModule_Create(&module);
}
