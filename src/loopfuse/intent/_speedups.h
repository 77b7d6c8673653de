/*
 * Shared declarations of the loopfuse.intent._speedups extension (optional C
 * accelerator of loopfuse.intent). Every function here must give exactly what the
 * pure-Python reference gives, or decline (return Py_None) so that Python decides.
 */
#ifndef LOOPFUSE_SPEEDUPS_H
#define LOOPFUSE_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* _cchat.c: chat_intent(body, parse_arguments, not_json[, fast_loads, fast_max_length], /) */
PyObject *lf_chat_intent(PyObject *module, PyObject *const *args, Py_ssize_t nargs);

#endif
