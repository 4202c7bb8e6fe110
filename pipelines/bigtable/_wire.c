/* The MutateRows entry of a mapped row, written as protobuf's bytes in one pass: the compiled twin of
 * entries.set_cells_record's common case (docs/PERFORMANCE.md, "Entries compiled").
 *
 * set_cells_record(row_key, cells) -> (size, wire, data) | None
 *
 * row_key is bytes; cells a sequence of (family: str, qualifier: bytes, micros: int, value: bytes) tuples, each a
 * SetCell of the entry. Returns the entry's serialized size, the entry as field 2 of a MutateRowsRequest (tag,
 * length, message), and the bytes of the qualifiers and values -- byte for byte what entries.set_cells_record
 * returns (tests/pipelines/test_bigtable_entries.py). Anything else (a family that is no str or not UTF-8, a qualifier
 * or value that is no bytes, a timestamp that is no int or leaves int64, a cell that is no 4-tuple) gives None, and
 * the Python function answers: it raises protobuf's own errors, which are kept in one place.
 *
 * change_record(row_key, mutations) -> (size, wire, None) | None
 *
 * The same for a change's entry (entries.change_record): one-millisecond deletes ((family, qualifier, micros), a
 * DeleteFromColumn each) then the cells as above, in one pass (docs/PERFORMANCE.md, "Catch-up round 10").
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

static size_t varint_size(uint64_t n) {
    size_t size = 1;
    while (n >= 0x80) {
        n >>= 7;
        size++;
    }
    return size;
}

static char *put_varint(char *out, uint64_t n) {
    while (n >= 0x80) {
        *out++ = (char)((n & 0x7F) | 0x80);
        n >>= 7;
    }
    *out++ = (char)n;
    return out;
}

static char *put_field(char *out, char tag, const char *data, Py_ssize_t length) {
    *out++ = tag;
    out = put_varint(out, (uint64_t)length);
    memcpy(out, data, (size_t)length);
    return out + length;
}

/* A length-delimited field's size (tag, length, data); 0 for an empty one, which protobuf leaves out. */
static size_t bytes_field(Py_ssize_t length) {
    return length ? 1 + varint_size((uint64_t)length) + (size_t)length : 0;
}

/* A message field's size (tag, length, message), written even when empty. */
static size_t message_field(size_t size) {
    return 1 + varint_size(size) + size;
}

/* A SetCell's or DeleteFromColumn's family_name (1) and column_qualifier (2), each left out when empty. */
static char *put_column(char *out, const char *family, Py_ssize_t family_len, const char *qualifier,
                        Py_ssize_t qualifier_len) {
    if (family_len)
        out = put_field(out, 0x0a, family, family_len);
    if (qualifier_len)
        out = put_field(out, 0x12, qualifier, qualifier_len);
    return out;
}

typedef struct {
    const char *family, *qualifier, *value;
    Py_ssize_t family_len, qualifier_len, value_len;
    uint64_t micros; /* an int64 as protobuf writes it: a negative one as its two's complement */
    size_t set_cell;  /* the SetCell message's size */
} Cell;

/* The cell's fields, or 0 where the Python function must answer (no exception left set). */
static int read_cell(PyObject *item, Cell *cell) {
    if (!PyTuple_Check(item) || Py_TYPE(item)->tp_iter != PyTuple_Type.tp_iter || PyTuple_GET_SIZE(item) != 4)
        return 0;
    PyObject *family = PyTuple_GET_ITEM(item, 0), *qualifier = PyTuple_GET_ITEM(item, 1);
    PyObject *micros = PyTuple_GET_ITEM(item, 2), *value = PyTuple_GET_ITEM(item, 3);
    if (!PyUnicode_CheckExact(family) || !PyBytes_CheckExact(qualifier) || !PyLong_CheckExact(micros)
            || !PyBytes_CheckExact(value))
        return 0;
    cell->family = PyUnicode_AsUTF8AndSize(family, &cell->family_len);
    if (cell->family == NULL) { /* e.g. a lone surrogate: str.encode's error, raised by the Python function */
        PyErr_Clear();
        return 0;
    }
    int overflow = 0;
    long long stamp = PyLong_AsLongLongAndOverflow(micros, &overflow);
    if (overflow || (stamp == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    cell->micros = (uint64_t)stamp;
    cell->qualifier = PyBytes_AS_STRING(qualifier);
    cell->qualifier_len = PyBytes_GET_SIZE(qualifier);
    cell->value = PyBytes_AS_STRING(value);
    cell->value_len = PyBytes_GET_SIZE(value);
    /* each field left out when empty (0), as protobuf does */
    size_t size = bytes_field(cell->family_len) + bytes_field(cell->qualifier_len) + bytes_field(cell->value_len);
    if (cell->micros)
        size += 1 + varint_size(cell->micros);
    cell->set_cell = size;
    return 1;
}

/* The Mutation's size: its set_cell field (tag, length, SetCell). */
static size_t mutation_size(const Cell *cell) {
    return message_field(cell->set_cell);
}

/* The cell as the entry's Mutation (tag, length, set_cell); each SetCell field left out when empty, as protobuf does. */
static char *put_cell(char *out, const Cell *cell) {
    *out++ = 0x12; /* Entry.mutations */
    out = put_varint(out, mutation_size(cell));
    *out++ = 0x0a; /* Mutation.set_cell */
    out = put_varint(out, cell->set_cell);
    out = put_column(out, cell->family, cell->family_len, cell->qualifier, cell->qualifier_len);
    if (cell->micros) {
        *out++ = 0x18;
        out = put_varint(out, cell->micros);
    }
    if (cell->value_len)
        out = put_field(out, 0x22, cell->value, cell->value_len);
    return out;
}

/* A new bytes object for an entry of `size` bytes as field 2 of a MutateRowsRequest, its head and row key written;
 * *out where its mutations go. NULL with the error set where it could not be made. */
static PyObject *new_entry(PyObject *row_key, size_t size, char **out) {
    PyObject *wire = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)message_field(size));
    if (wire == NULL)
        return NULL;
    char *at = PyBytes_AS_STRING(wire);
    *at++ = 0x12; /* MutateRowsRequest.entries */
    at = put_varint(at, size);
    if (PyBytes_GET_SIZE(row_key))
        at = put_field(at, 0x0a, PyBytes_AS_STRING(row_key), PyBytes_GET_SIZE(row_key)); /* Entry.row_key */
    *out = at;
    return wire;
}

static PyObject *set_cells_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "set_cells_record(row_key, cells)");
        return NULL;
    }
    PyObject *row_key = args[0];
    if (!PyBytes_CheckExact(row_key))
        Py_RETURN_NONE;
    if (!PyList_CheckExact(args[1]) && !PyTuple_CheckExact(args[1]))
        Py_RETURN_NONE; /* no iteration of anything else: the Python function must see it untouched */
    PyObject *cells = Py_NewRef(args[1]);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(cells);
    PyObject **items = PySequence_Fast_ITEMS(cells);
    Cell small[32];
    Cell *found = count <= 32 ? small : PyMem_New(Cell, (size_t)count);
    PyObject *result = NULL;
    if (found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t key_len = PyBytes_GET_SIZE(row_key);
    size_t size = bytes_field(key_len);
    long long data = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!read_cell(items[i], &found[i])) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        size_t mutation = mutation_size(&found[i]);
        size += message_field(mutation);
        data += found[i].qualifier_len + found[i].value_len;
    }
    char *out;
    PyObject *wire = new_entry(row_key, size, &out);
    if (wire == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count; i++)
        out = put_cell(out, &found[i]);
    result = Py_BuildValue("(nNL)", (Py_ssize_t)size, wire, data);
done:
    if (found != NULL && found != small)
        PyMem_Free(found);
    Py_DECREF(cells);
    return result;
}

/* A change's one-millisecond delete (family, qualifier, micros): a Mutation's delete_from_column. */
typedef struct {
    const char *family, *qualifier;
    Py_ssize_t family_len, qualifier_len;
    long long micros;
    size_t column; /* the DeleteFromColumn message's size: its family, qualifier and time range fields */
    size_t range;  /* the TimestampRange message's size */
} Delete;

/* The delete's fields, or 0 where the Python function must answer (no exception left set): a family that is no str
 * (or not UTF-8), a qualifier that is no bytes, a timestamp that is no int or whose millisecond leaves int64. */
static int read_delete(PyObject *item, Delete *delete) {
    PyObject *family = PyTuple_GET_ITEM(item, 0), *qualifier = PyTuple_GET_ITEM(item, 1);
    PyObject *micros = PyTuple_GET_ITEM(item, 2);
    if (!PyUnicode_CheckExact(family) || !PyBytes_CheckExact(qualifier) || !PyLong_CheckExact(micros))
        return 0;
    int overflow = 0;
    long long stamp = PyLong_AsLongLongAndOverflow(micros, &overflow);
    if (overflow || (stamp == -1 && PyErr_Occurred()) || stamp >= LLONG_MAX - 999) {
        PyErr_Clear();
        return 0;
    }
    delete->family = PyUnicode_AsUTF8AndSize(family, &delete->family_len);
    if (delete->family == NULL) {
        PyErr_Clear();
        return 0;
    }
    delete->micros = stamp;
    delete->qualifier = PyBytes_AS_STRING(qualifier);
    delete->qualifier_len = PyBytes_GET_SIZE(qualifier);
    /* [micros, micros + 1000): each bound left out when 0, as protobuf does */
    size_t range = 0;
    if (stamp != 0)
        range += 1 + varint_size((uint64_t)stamp);
    if (stamp != -1000)
        range += 1 + varint_size((uint64_t)(stamp + 1000));
    delete->range = range;
    delete->column = bytes_field(delete->family_len) + bytes_field(delete->qualifier_len) + message_field(range);
    return 1;
}

/* The delete's Mutation size: its delete_from_column field (tag, length, DeleteFromColumn). */
static size_t delete_size(const Delete *delete) {
    return message_field(delete->column);
}

/* A tuple of `size` items that iterates and measures itself as a tuple: the Python function tells deletes from cells
 * by len() and unpacks by iterating, so a subclass with its own __iter__ or __len__ is left to it. */
static int is_tuple_of(PyObject *item, Py_ssize_t size) {
    PyTypeObject *type = Py_TYPE(item);
    return PyTuple_Check(item) && type->tp_iter == PyTuple_Type.tp_iter
           && type->tp_as_sequence->sq_length == PyTuple_Type.tp_as_sequence->sq_length
           && PyTuple_GET_SIZE(item) == size;
}

/* change_record(row_key, mutations) -> (size, wire, None) | None: entries.change_record's bytes for a change's entry
 * (one-millisecond deletes, 3-tuples, then SetCells, 4-tuples, as set_cells_record takes them); None for anything it
 * does not take itself, and the Python function answers (or returns None for protobuf's own path). */
static PyObject *change_record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "change_record(row_key, mutations)");
        return NULL;
    }
    PyObject *row_key = args[0];
    if (!PyBytes_CheckExact(row_key) || (!PyList_CheckExact(args[1]) && !PyTuple_CheckExact(args[1])))
        Py_RETURN_NONE;
    PyObject *mutations = Py_NewRef(args[1]);
    Py_ssize_t count = PySequence_Fast_GET_SIZE(mutations), deletes = 0;
    PyObject **items = PySequence_Fast_ITEMS(mutations);
    while (deletes < count && is_tuple_of(items[deletes], 3))
        deletes++;
    Delete small_deletes[16];
    Cell small_cells[32];
    Delete *gone = deletes <= 16 ? small_deletes : PyMem_New(Delete, (size_t)deletes);
    Cell *found = count - deletes <= 32 ? small_cells : PyMem_New(Cell, (size_t)(count - deletes));
    PyObject *result = NULL;
    if (gone == NULL || found == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t key_len = PyBytes_GET_SIZE(row_key);
    size_t size = bytes_field(key_len);
    for (Py_ssize_t i = 0; i < count; i++) {
        size_t mutation;
        if (i < deletes) {
            if (!read_delete(items[i], &gone[i]))
                goto not_taken;
            mutation = delete_size(&gone[i]);
        } else {
            if (!is_tuple_of(items[i], 4) || !read_cell(items[i], &found[i - deletes]))
                goto not_taken;
            mutation = mutation_size(&found[i - deletes]);
        }
        size += message_field(mutation);
    }
    char *out;
    PyObject *wire = new_entry(row_key, size, &out);
    if (wire == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < deletes; i++) {
        const Delete *delete = &gone[i];
        *out++ = 0x12; /* Entry.mutations */
        out = put_varint(out, delete_size(delete));
        *out++ = 0x12; /* Mutation.delete_from_column */
        out = put_varint(out, delete->column);
        out = put_column(out, delete->family, delete->family_len, delete->qualifier, delete->qualifier_len);
        *out++ = 0x1a; /* DeleteFromColumn.time_range */
        out = put_varint(out, delete->range);
        if (delete->micros != 0) {
            *out++ = 0x08; /* TimestampRange.start_timestamp_micros */
            out = put_varint(out, (uint64_t)delete->micros);
        }
        if (delete->micros != -1000) {
            *out++ = 0x10; /* TimestampRange.end_timestamp_micros */
            out = put_varint(out, (uint64_t)(delete->micros + 1000));
        }
    }
    for (Py_ssize_t i = 0; i < count - deletes; i++)
        out = put_cell(out, &found[i]);
    result = Py_BuildValue("(nNO)", (Py_ssize_t)size, wire, Py_None);
    goto done;
not_taken:
    result = Py_NewRef(Py_None);
done:
    if (gone != NULL && gone != small_deletes)
        PyMem_Free(gone);
    if (found != NULL && found != small_cells)
        PyMem_Free(found);
    Py_DECREF(mutations);
    return result;
}

static PyMethodDef methods[] = {
    {"set_cells_record", (PyCFunction)(void (*)(void))set_cells_record, METH_FASTCALL,
     "set_cells_record(row_key, cells) -> (size, wire, data) | None: see entries.set_cells_record."},
    {"change_record", (PyCFunction)(void (*)(void))change_record, METH_FASTCALL,
     "change_record(row_key, mutations) -> (size, wire, None) | None: see entries.change_record."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire", NULL, 0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__wire(void) { return PyModule_Create(&module); }
