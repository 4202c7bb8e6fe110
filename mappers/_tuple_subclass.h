/* Shared by the C modules that make instances of a Python tuple subclass (mappers/_json.c's rows and cells,
 * pipelines/bigtable/_rows.c's cells): which subclasses they may make with tuple's own layout, and the import-time
 * probe that check needs. Each module including it gets its own static copy; its init calls
 * tuple_subclass_probe() before anything uses python_tuple_subclass().
 *
 * Built with include-dirs = ["mappers"] and listed in each module's depends (pyproject.toml), so that a change here
 * rebuilds both; tools/setup.sh's rebuild stamp digests the headers beside the modules. */
#ifndef DDB2BT_TUPLE_SUBCLASS_H
#define DDB2BT_TUPLE_SUBCLASS_H

#include <Python.h>

static destructor python_subclass_dealloc; /* subtype_dealloc: a class statement's; set by the probe */

/* A tuple subclass made by class statements (or type()) all the way down to tuple: its items are its Py_SIZE items,
 * freed as a tuple's are. A C type of tuple's sizes (a structseq: os.stat_result, time.struct_time) keeps hidden items
 * past Py_SIZE that its dealloc frees: made with fewer items, it would free memory past them. */
static inline int python_tuple_subclass(PyTypeObject *type) {
    for (PyTypeObject *t = type; t != &PyTuple_Type; t = t->tp_base)
        if (t == NULL || t->tp_dealloc != python_subclass_dealloc)
            return 0;
    return 1;
}

/* The dealloc every class statement's type gets (subtype_dealloc, not exported): read from a class made here.
 * 0, or -1 with an exception set. */
static inline int tuple_subclass_probe(void) {
    PyObject *probe = PyObject_CallFunction((PyObject *)&PyType_Type, "s(O){}", "_probe", (PyObject *)&PyTuple_Type);
    if (probe == NULL)
        return -1;
    python_subclass_dealloc = ((PyTypeObject *)probe)->tp_dealloc;
    Py_DECREF(probe);
    return 0;
}

#endif
