/* Whether a row read back holds the same cells as an item's mapped row: the compiled twin of compare.py's
 * `set(found) == set(expected)` (docs/PERFORMANCE.md, "Validate round 10").
 *
 * same_cells(found, expected) -> bool | None
 *
 * found and expected are lists or tuples of cells, each a tuple (or a subclass with tuple's comparison and hash, as
 * mappers.results.Cell) of four items that are exactly str, bytes or int. Two such cells are equal, as Python compares
 * them, when their items are equal value for value; the sets are equal when each cell of one is equal to a cell of the
 * other. Compared here item by item, with no set built and nothing hashed. Anything else (another type, a cell that is
 * no such tuple, more than 64 cells a side) gives None, and Python compares the sets
 * (tests/mappers/test_validate_same_cells.py holds the answers to Python's).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define MOST 64

/* 1 where the item is of a type compared here. */
static int plain_item(PyObject *item) {
    return (PyUnicode_CheckExact(item) && PyUnicode_IS_READY(item)) || PyBytes_CheckExact(item)
           || PyLong_CheckExact(item);
}

static int plain_cell(PyObject *cell) {
    PyTypeObject *type = Py_TYPE(cell);
    if (!PyTuple_Check(cell) || type->tp_richcompare != PyTuple_Type.tp_richcompare
            || type->tp_hash != PyTuple_Type.tp_hash || PyTuple_GET_SIZE(cell) != 4)
        return 0;
    for (Py_ssize_t i = 0; i < 4; i++)
        if (!plain_item(PyTuple_GET_ITEM(cell, i)))
            return 0;
    return 1;
}

/* Two items of the types above, equal as Python compares them (a str never equals bytes or an int). */
static int same_item(PyObject *a, PyObject *b) {
    if (a == b)
        return 1;
    if (Py_TYPE(a) != Py_TYPE(b))
        return 0;
    if (PyBytes_CheckExact(a))
        return PyBytes_GET_SIZE(a) == PyBytes_GET_SIZE(b)
               && memcmp(PyBytes_AS_STRING(a), PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(a)) == 0;
    if (PyUnicode_CheckExact(a)) {
        if (PyUnicode_GET_LENGTH(a) != PyUnicode_GET_LENGTH(b) || PyUnicode_KIND(a) != PyUnicode_KIND(b))
            return 0; /* a str's kind is the narrowest that holds it: equal texts have one kind */
        return memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b),
                      (size_t)(PyUnicode_GET_LENGTH(a) * PyUnicode_KIND(a))) == 0;
    }
    int overflow_a, overflow_b; /* ints: most timestamps fit a long long; any other, int's own comparison (C's) */
    long long x = PyLong_AsLongLongAndOverflow(a, &overflow_a), y = PyLong_AsLongLongAndOverflow(b, &overflow_b);
    if (!overflow_a && !overflow_b)
        return x == y;
    return PyObject_RichCompareBool(a, b, Py_EQ) == 1;
}

static int same_cell(PyObject *a, PyObject *b) {
    if (a == b)
        return 1;
    /* the qualifier and the value tell most cells apart; then the timestamp and the family */
    static const int order[4] = {1, 3, 2, 0};
    for (int i = 0; i < 4; i++)
        if (!same_item(PyTuple_GET_ITEM(a, order[i]), PyTuple_GET_ITEM(b, order[i])))
            return 0;
    return 1;
}

/* Whether each of `some` equals one of `others`; the one at the same place is tried first. */
static int within(PyObject **some, PyObject **others, Py_ssize_t count) {
    for (Py_ssize_t i = 0; i < count; i++) {
        if (same_cell(some[i], others[i]))
            continue;
        Py_ssize_t j = 0;
        while (j < count && (j == i || !same_cell(some[i], others[j])))
            j++;
        if (j == count)
            return 0;
    }
    return 1;
}

static PyObject *same_cells(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "same_cells(found, expected)");
        return NULL;
    }
    PyObject *found = args[0], *expected = args[1];
    if ((!PyList_CheckExact(found) && !PyTuple_CheckExact(found))
            || (!PyList_CheckExact(expected) && !PyTuple_CheckExact(expected)))
        Py_RETURN_NONE;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(found);
    if (count != PySequence_Fast_GET_SIZE(expected) || count > MOST)
        Py_RETURN_NONE;
    /* held: nothing below runs Python code (int comparison is C's), but a list is the caller's to change */
    PyObject *a[MOST], *b[MOST];
    for (Py_ssize_t i = 0; i < count; i++) {
        a[i] = PySequence_Fast_GET_ITEM(found, i);
        b[i] = PySequence_Fast_GET_ITEM(expected, i);
        if (!plain_cell(a[i]) || !plain_cell(b[i]))
            Py_RETURN_NONE;
    }
    if (within(a, b, count) && within(b, a, count))
        Py_RETURN_TRUE;
    Py_RETURN_FALSE;
}

static PyMethodDef methods[] = {
    {"same_cells", (PyCFunction)(void (*)(void))same_cells, METH_FASTCALL,
     "same_cells(found, expected) -> bool | None: see compare.same_cells."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_cells", NULL, 0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__cells(void) { return PyModule_Create(&module); }
