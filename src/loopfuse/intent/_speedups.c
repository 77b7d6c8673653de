/*
 * loopfuse.intent._speedups: the optional C accelerator of loopfuse.intent.
 *
 * Two functions, each the twin of a pure-Python reference that stays the definition:
 *
 *   dumps(value, limit)    the canonical writer (_canonical.write / canonical_json)
 *   too_deep(value, limit) the nesting check (_json._too_deep)
 *
 * Each returns exactly what its reference returns, or None ("declined") when it meets
 * something it does not handle (a subclass of a JSON type, a lone surrogate, nesting
 * past the limit): the caller then runs the reference, which also raises the right
 * error. Declining is always safe, so the C code only handles what it can mirror
 * exactly. Tests compare every function with its reference on generated data.
 *
 * Why C: a fingerprint is computed before every LLM request, and with orjson parsing
 * in ~0.4x json.loads, the Python walk, depth check and writer were the rest of the
 * bill (issue #2 budgets the whole fingerprint at 1.0x json.loads).
 *
 * Built against the stable ABI (Python 3.11+) unless the interpreter is free-threaded;
 * setup.py decides. The module keeps no mutable state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deeper limits are declined: the walks recurse, and a thread's C stack may be small. */
#define MAX_LIMIT 1000

enum { DONE = 0, FAILED = -1, DECLINED = 1 };

/* ---------------------------------------------------------------- output buffer */

typedef struct {
    char *data;
    Py_ssize_t length;
    Py_ssize_t capacity;
} Buffer;

static int
buffer_reserve(Buffer *buf, Py_ssize_t extra)
{
    if (buf->length + extra <= buf->capacity) {
        return DONE;
    }
    Py_ssize_t capacity = buf->capacity ? buf->capacity : 4096;
    while (capacity < buf->length + extra) {
        if (capacity > PY_SSIZE_T_MAX / 2) {
            PyErr_NoMemory();
            return FAILED;
        }
        capacity *= 2;
    }
    char *data = PyMem_Realloc(buf->data, (size_t)capacity);
    if (data == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    buf->data = data;
    buf->capacity = capacity;
    return DONE;
}

static int
buffer_write(Buffer *buf, const char *bytes, Py_ssize_t length)
{
    if (buffer_reserve(buf, length) != DONE) {
        return FAILED;
    }
    memcpy(buf->data + buf->length, bytes, (size_t)length);
    buf->length += length;
    return DONE;
}

static int
buffer_byte(Buffer *buf, char byte)
{
    if (buf->length == buf->capacity && buffer_reserve(buf, 1) != DONE) {
        return FAILED;
    }
    buf->data[buf->length++] = byte;
    return DONE;
}

/* ---------------------------------------------------------------- strings */

/* What json's encode_basestring (ensure_ascii=False) writes for a byte: 0 = as is,
 * a letter = backslash + that letter, 'u' = \u00XX. Bytes >= 0x80 are parts of UTF-8
 * sequences and pass through. */
static const char ESCAPE[256] = {
    ['\b'] = 'b', ['\t'] = 't', ['\n'] = 'n', ['\f'] = 'f', ['\r'] = 'r',
    [0] = 'u', [1] = 'u', [2] = 'u', [3] = 'u', [4] = 'u', [5] = 'u', [6] = 'u',
    [7] = 'u', [11] = 'u', [14] = 'u', [15] = 'u', [16] = 'u', [17] = 'u', [18] = 'u',
    [19] = 'u', [20] = 'u', [21] = 'u', [22] = 'u', [23] = 'u', [24] = 'u', [25] = 'u',
    [26] = 'u', [27] = 'u', [28] = 'u', [29] = 'u', [30] = 'u', [31] = 'u',
    ['"'] = '"', ['\\'] = '\\',
};

/* Whether any of 8 bytes is below 0x20, '"' or '\\' (bit tricks after "Bit Twiddling
 * Hacks": a byte under n leaves its high bit set in (x - n) & ~x). */
static inline int
word_may_need_escape(const char *bytes)
{
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    uint64_t word;
    memcpy(&word, bytes, 8);
    uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
    uint64_t found = ((word - ones * 0x20) & ~word) | ((quote - ones) & ~quote) |
                     ((backslash - ones) & ~backslash);
    return (found & highs) != 0;
}

static int
write_utf8_string(Buffer *buf, const char *text, Py_ssize_t length)
{
    static const char hex[] = "0123456789abcdef";
    /* Worst case: every byte becomes \u00XX. */
    if (buffer_reserve(buf, 6 * length + 2) != DONE) {
        return FAILED;
    }
    char *out = buf->data + buf->length;
    *out++ = '"';
    Py_ssize_t start = 0;
    for (Py_ssize_t i = 0; i < length; i++) {
        /* Most text needs no escape: skip it eight bytes at a time (a false alarm only
         * sends a word through the byte loop). */
        while (i + 8 <= length && !word_may_need_escape(text + i)) {
            i += 8;
        }
        if (i == length) {
            break;
        }
        unsigned char byte = (unsigned char)text[i];
        char escape = ESCAPE[byte];
        if (escape == 0) {
            continue;
        }
        memcpy(out, text + start, (size_t)(i - start));
        out += i - start;
        start = i + 1;
        *out++ = '\\';
        *out++ = escape;
        if (escape == 'u') {
            *out++ = '0';
            *out++ = '0';
            *out++ = hex[byte >> 4];
            *out++ = hex[byte & 15];
        }
    }
    memcpy(out, text + start, (size_t)(length - start));
    out += length - start;
    *out++ = '"';
    buf->length = out - buf->data;
    return DONE;
}

/* An exact str as a JSON string; a lone surrogate (no UTF-8 form) is declined. */
static int
write_string(Buffer *buf, PyObject *string)
{
    Py_ssize_t length;
    const char *text = PyUnicode_AsUTF8AndSize(string, &length);
    if (text == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
            return FAILED;
        }
        PyErr_Clear();
        return DECLINED;
    }
    return write_utf8_string(buf, text, length);
}

/* ---------------------------------------------------------------- numbers */

/* _canonical.format_float: repr's shortest digits, ``1e-05`` spelt ``0.00001``, a
 * positive exponent with its sign and no padding, non-finite as null. */
static int
write_double(Buffer *buf, double value)
{
    if (value != value || value == Py_HUGE_VAL || value == -Py_HUGE_VAL) {
        return buffer_write(buf, "null", 4);
    }
    char *repr = PyOS_double_to_string(value, 'r', 0, Py_DTSF_ADD_DOT_0, NULL);
    if (repr == NULL) {
        return FAILED;
    }
    int status;
    char *e = strchr(repr, 'e');
    if (e == NULL) {
        status = buffer_write(buf, repr, (Py_ssize_t)strlen(repr));
        PyMem_Free(repr);
        return status;
    }
    int power = atoi(e + 1);
    char text[64];
    int used;
    if (power == -5) {
        /* "d.ddde-05" -> "0.0000dddd": the digits of the mantissa without its point. */
        const char *digit = repr;
        used = 0;
        if (*digit == '-') {
            text[used++] = '-';
            digit++;
        }
        memcpy(text + used, "0.0000", 6);
        used += 6;
        for (; digit < e && used < (int)sizeof(text) - 1; digit++) {
            if (*digit != '.') {
                text[used++] = *digit;
            }
        }
    }
    else {
        used = snprintf(text, sizeof(text), power > 0 ? "%.*se+%d" : "%.*se%d",
                        (int)(e - repr), repr, power);
    }
    PyMem_Free(repr);
    if (used < 0 || used >= (int)sizeof(text)) {
        PyErr_SetString(PyExc_SystemError, "loopfuse: float text too long");
        return FAILED;
    }
    return buffer_write(buf, text, used);
}

/* Integers in [-2**63, 2**64) as decimals; any other as the double it rounds to
 * (null past the largest double), as orjson reads such an integer. */
static int
write_int(Buffer *buf, PyObject *number)
{
    char text[32];
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(number, &overflow);
    if (value == -1 && PyErr_Occurred()) {
        return FAILED;
    }
    if (overflow == 0) {
        int used = snprintf(text, sizeof(text), "%lld", value);
        return buffer_write(buf, text, used);
    }
    if (overflow > 0) {
        unsigned long long big = PyLong_AsUnsignedLongLong(number);
        if (!(big == (unsigned long long)-1 && PyErr_Occurred())) {
            int used = snprintf(text, sizeof(text), "%llu", big);
            return buffer_write(buf, text, used);
        }
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return FAILED;
        }
        PyErr_Clear();
    }
    double rounded = PyLong_AsDouble(number);
    if (rounded == -1.0 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
            return FAILED;
        }
        PyErr_Clear();
        return buffer_write(buf, "null", 4);
    }
    return write_double(buf, rounded);
}

/* ---------------------------------------------------------------- objects */

typedef struct {
    const char *key;
    Py_ssize_t length;
    PyObject *value; /* borrowed: the dict is not changed while it is written */
} Member;

/* Code-point order is UTF-8 byte order, so keys sort with memcmp. */
static int
member_before(const Member *a, const Member *b)
{
    Py_ssize_t common = a->length < b->length ? a->length : b->length;
    int order = memcmp(a->key, b->key, (size_t)common);
    return order < 0 || (order == 0 && a->length < b->length);
}

static int
member_compare(const void *a, const void *b)
{
    const Member *x = a, *y = b;
    return member_before(x, y) ? -1 : (member_before(y, x) ? 1 : 0);
}

static int write_value(Buffer *buf, PyObject *value, int depth, int limit);

static int
write_object(Buffer *buf, PyObject *dict, int depth, int limit)
{
    Py_ssize_t count = PyDict_Size(dict);
    if (count == 0) {
        return buffer_write(buf, "{}", 2);
    }
    Member small[16];
    Member *members = small;
    if (count > 16) {
        members = PyMem_Malloc(sizeof(Member) * (size_t)count);
        if (members == NULL) {
            PyErr_NoMemory();
            return FAILED;
        }
    }
    int status = DONE;
    Py_ssize_t position = 0, used = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &position, &key, &value)) {
        if (used == count || !PyUnicode_CheckExact(key)) {
            status = DECLINED; /* a non-str key is written as json.dumps would: Python */
            goto finally;
        }
        Py_ssize_t length;
        const char *text = PyUnicode_AsUTF8AndSize(key, &length);
        if (text == NULL) {
            status = PyErr_ExceptionMatches(PyExc_UnicodeEncodeError) ? DECLINED : FAILED;
            if (status == DECLINED) {
                PyErr_Clear();
            }
            goto finally;
        }
        members[used].key = text;
        members[used].length = length;
        members[used].value = value;
        used++;
    }
    if (used < 24) {
        for (Py_ssize_t i = 1; i < used; i++) { /* insertion sort: most objects are small */
            Member current = members[i];
            Py_ssize_t j = i;
            while (j > 0 && member_before(&current, &members[j - 1])) {
                members[j] = members[j - 1];
                j--;
            }
            members[j] = current;
        }
    }
    else {
        qsort(members, (size_t)used, sizeof(Member), member_compare);
    }
    status = buffer_byte(buf, '{');
    for (Py_ssize_t i = 0; status == DONE && i < used; i++) {
        if (i && (status = buffer_byte(buf, ',')) != DONE) {
            break;
        }
        if ((status = write_utf8_string(buf, members[i].key, members[i].length)) != DONE) {
            break;
        }
        if ((status = buffer_byte(buf, ':')) != DONE) {
            break;
        }
        status = write_value(buf, members[i].value, depth + 1, limit);
    }
    if (status == DONE) {
        status = buffer_byte(buf, '}');
    }
finally:
    if (members != small) {
        PyMem_Free(members);
    }
    return status;
}

static int
write_array(Buffer *buf, PyObject *sequence, int is_list, int depth, int limit)
{
    Py_ssize_t count = is_list ? PyList_Size(sequence) : PyTuple_Size(sequence);
    if (buffer_byte(buf, '[') != DONE) {
        return FAILED;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (i && buffer_byte(buf, ',') != DONE) {
            return FAILED;
        }
        /* A list written here cannot shrink: writing runs no Python code. */
        PyObject *item = is_list ? PyList_GetItem(sequence, i) : PyTuple_GetItem(sequence, i);
        if (item == NULL) {
            return FAILED;
        }
        int status = write_value(buf, item, depth + 1, limit);
        if (status != DONE) {
            return status;
        }
    }
    return buffer_byte(buf, ']');
}

static int
write_value(Buffer *buf, PyObject *value, int depth, int limit)
{
    if (PyUnicode_CheckExact(value)) {
        return write_string(buf, value);
    }
    if (value == Py_None) {
        return buffer_write(buf, "null", 4);
    }
    if (value == Py_True) {
        return buffer_write(buf, "true", 4);
    }
    if (value == Py_False) {
        return buffer_write(buf, "false", 5);
    }
    if (PyLong_CheckExact(value)) {
        return write_int(buf, value);
    }
    if (PyFloat_CheckExact(value)) {
        return write_double(buf, PyFloat_AsDouble(value));
    }
    int is_dict = PyDict_CheckExact(value);
    int is_list = PyList_CheckExact(value);
    if (!is_dict && !is_list && !PyTuple_CheckExact(value)) {
        return DECLINED; /* subclasses, other mappings, non-JSON values: Python */
    }
    if (depth >= limit) {
        return DECLINED; /* the reference raises InvalidInputError */
    }
    return is_dict ? write_object(buf, value, depth, limit)
                   : write_array(buf, value, is_list, depth, limit);
}

static int
limit_argument(PyObject *const *args, Py_ssize_t nargs, const char *name, int *limit)
{
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "%s() takes 2 positional arguments (%zd given)", name,
                     nargs);
        return FAILED;
    }
    long value = PyLong_AsLong(args[1]);
    if (value == -1 && PyErr_Occurred()) {
        return FAILED;
    }
    if (value < 0 || value > MAX_LIMIT) {
        return DECLINED;
    }
    *limit = (int)value;
    return DONE;
}

PyDoc_STRVAR(dumps_doc,
"dumps(value, limit, /)\n"
"--\n"
"\n"
"Canonical JSON bytes of value with containers nested at most limit deep, as\n"
"loopfuse.intent._canonical.write writes them; None when the value holds something\n"
"only the Python writer handles (or raises for).");

static PyObject *
speedups_dumps(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    int limit;
    int status = limit_argument(args, nargs, "dumps", &limit);
    if (status != DONE) {
        if (status == FAILED) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    Buffer buf = {NULL, 0, 0};
    status = write_value(&buf, args[0], 0, limit);
    PyObject *result = NULL;
    if (status == DONE) {
        result = PyBytes_FromStringAndSize(buf.data, buf.length);
    }
    else if (status == DECLINED) {
        result = Py_NewRef(Py_None);
    }
    PyMem_Free(buf.data);
    return result;
}

/* ---------------------------------------------------------------- nesting */

enum { SHALLOW = 0, TOO_DEEP = 1, UNSURE = 2 };

static int deeper(PyObject *value, int depth, int limit);

/* One value inside a container at depth: a leaf, a container to walk, or something the
 * reference inspects its own way (a tuple, a Mapping, a subclass): UNSURE. */
static int
deeper_child(PyObject *child, int depth, int limit)
{
    if (PyDict_CheckExact(child) || PyList_CheckExact(child)) {
        return deeper(child, depth + 1, limit);
    }
    if (PyUnicode_CheckExact(child) || child == Py_None || child == Py_True ||
        child == Py_False || PyLong_CheckExact(child) || PyFloat_CheckExact(child)) {
        return SHALLOW;
    }
    return UNSURE;
}

/* TOO_DEEP when a container under value (an exact dict or list at depth) nests past
 * limit; the first answer other than SHALLOW ends the walk, as in the reference. */
static int
deeper(PyObject *value, int depth, int limit)
{
    if (depth > limit) {
        return TOO_DEEP;
    }
    int found = SHALLOW;
    if (PyDict_CheckExact(value)) {
        Py_ssize_t position = 0;
        PyObject *key, *child;
        while (found == SHALLOW && PyDict_Next(value, &position, &key, &child)) {
            found = deeper_child(child, depth, limit);
        }
        return found;
    }
    Py_ssize_t count = PyList_Size(value);
    for (Py_ssize_t i = 0; found == SHALLOW && i < count; i++) {
        found = deeper_child(PyList_GetItem(value, i), depth, limit);
    }
    return found;
}

PyDoc_STRVAR(too_deep_doc,
"too_deep(value, limit, /)\n"
"--\n"
"\n"
"True when value nests more than limit dicts/lists deep (the value itself is at\n"
"depth 1), False when not; None when it holds a container other than an exact dict\n"
"or list, or any value that is not an exact JSON type.");

static PyObject *
speedups_too_deep(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    int limit;
    int status = limit_argument(args, nargs, "too_deep", &limit);
    if (status != DONE) {
        if (status == FAILED) {
            return NULL;
        }
        Py_RETURN_NONE;
    }
    PyObject *value = args[0];
    if (!PyDict_CheckExact(value) && !PyList_CheckExact(value)) {
        Py_RETURN_NONE;
    }
    switch (deeper(value, 1, limit)) {
    case TOO_DEEP:
        Py_RETURN_TRUE;
    case SHALLOW:
        Py_RETURN_FALSE;
    default:
        Py_RETURN_NONE;
    }
}

/* ---------------------------------------------------------------- module */

static PyMethodDef speedups_methods[] = {
    {"dumps", (PyCFunction)(void (*)(void))speedups_dumps, METH_FASTCALL, dumps_doc},
    {"too_deep", (PyCFunction)(void (*)(void))speedups_too_deep, METH_FASTCALL, too_deep_doc},
    {NULL, NULL, 0, NULL},
};

static PyModuleDef_Slot speedups_slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
#endif
#ifdef Py_GIL_DISABLED
    {Py_mod_gil, Py_MOD_GIL_NOT_USED},
#endif
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "loopfuse.intent._speedups",
    "The C accelerator of loopfuse.intent: canonical writer and nesting check.",
    0,
    speedups_methods,
    speedups_slots,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    return PyModuleDef_Init(&speedups_module);
}
