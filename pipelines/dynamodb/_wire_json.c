/* Two pieces of wire_json compiled (docs/PERFORMANCE.md, "Scan and export round 10"): may_hold_big_int, the twin of
 * wire_json._python_may_hold_big_int, and untrack, behind wire_json.untracked (below).
 *
 * may_hold_big_int(data) -> bool | None
 *
 * Whether the bytes `data` have a run of 19 or more ASCII digits whose first digit follows (after at most one '-') the
 * start of the data or one of ':' ',' '[' ' ' '\t' '\r' '\n': a run that could be a bare JSON integer beyond 64 bits,
 * which orjson would turn into a float. The answer of the Python function for every bytes object
 * (tests/pipelines/test_wire_json.py); None for anything that is not bytes, and the Python function answers.
 *
 * Every Scan page and every block of export lines is looked at once, so the look is on the path of every item: the
 * Python function translates the whole text (a copy) and searches it; this one reads it once without a copy, and
 * skips 19 bytes at a time where no run of 19 digits can be.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define RUN 19

static inline int is_digit(unsigned char c) { return c >= '0' && c <= '9'; }

static inline int before_bare_number(unsigned char c) {
    return c == ':' || c == ',' || c == '[' || c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int has_big_int(const unsigned char *data, Py_ssize_t size) {
    /* i: where the next run of RUN digits may start; data[i - 1] is no digit (or i is 0), so a run found to
     * reach back to i starts at i. A run of RUN digits starting in [i, i + RUN - 1] covers i + RUN - 1. */
    Py_ssize_t i = 0;
    while (size - i >= RUN) {
        Py_ssize_t last = i + RUN - 1;
        if (!is_digit(data[last])) {
            i = last + 1;
            continue;
        }
        Py_ssize_t start = last, end = last + 1;
        while (start > i && is_digit(data[start - 1]))
            start--;
        while (end < size && is_digit(data[end]))
            end++;
        if (end - start >= RUN) {
            Py_ssize_t before = start - 1;
            if (before >= 0 && data[before] == '-')
                before--;
            if (before < 0 || before_bare_number(data[before]))
                return 1;
        }
        i = end + 1; /* data[end] is no digit (or the end) */
    }
    return 0;
}

static PyObject *may_hold_big_int(PyObject *Py_UNUSED(module), PyObject *data) {
    if (!PyBytes_CheckExact(data))
        Py_RETURN_NONE;
    return PyBool_FromLong(has_big_int((const unsigned char *)PyBytes_AS_STRING(data), PyBytes_GET_SIZE(data)));
}

/* untrack(value) -> None
 *
 * The dicts and lists of a parsed item (exact dict and list objects, nested to at most UNTRACK_DEPTH levels; anything
 * else is left as it is) taken off the garbage collector's lists, as CPython itself leaves a dict of strings untracked
 * (docs/PERFORMANCE.md, "Scan and export round 10"). The value is not changed. Why: an item is a tree of dicts and
 * lists made by the JSON parser; it waits for its batch to be written, and every young collection meanwhile walks
 * each of its containers, to find nothing (a tree holds no cycle). Untracked, they cost the collector nothing; they
 * are freed by reference counting as before. The objects they hold stay alive as long as they are held: an untracked
 * container's references count as references from outside for the collector, so it can only find less garbage, never
 * free what is in use. What an untracked container could not be part of is a collected cycle: a dict is tracked again
 * as soon as a container is put into it (CPython's own rule), a list is not; nothing puts an item into itself.
 * Without this module wire_json.untracked leaves the value as it is (the same value, tracked). */
#define UNTRACK_DEPTH 256

static void untrack_tree(PyObject *value, int depth) {
    if (depth > UNTRACK_DEPTH)
        return;
    if (PyDict_CheckExact(value)) {
        if (!PyObject_GC_IsTracked(value))
            return; /* holds no container (CPython keeps such a dict untracked), or walked already */
        Py_ssize_t at = 0;
        PyObject *key, *inner;
        while (PyDict_Next(value, &at, &key, &inner)) /* borrowed: nothing here runs Python code or frees */
            untrack_tree(inner, depth + 1);
        PyObject_GC_UnTrack(value);
    } else if (PyList_CheckExact(value)) {
        if (!PyObject_GC_IsTracked(value))
            return;
        for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++)
            untrack_tree(PyList_GET_ITEM(value, i), depth + 1);
        PyObject_GC_UnTrack(value);
    }
}

static PyObject *untrack(PyObject *Py_UNUSED(module), PyObject *value) {
    untrack_tree(value, 0);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"may_hold_big_int", may_hold_big_int, METH_O,
     "may_hold_big_int(data) -> bool | None: see wire_json._python_may_hold_big_int."},
    {"untrack", untrack, METH_O, "untrack(value) -> None: see wire_json.untracked."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire_json", NULL, 0, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__wire_json(void) { return PyModule_Create(&module); }
