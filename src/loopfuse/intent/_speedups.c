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
 * Why C: a fingerprint is computed before every LLM request; with orjson parsing in
 * ~0.4x json.loads, the depth check and the careful writer in Python cost as much
 * again. Only such data-in, data-out walks are here: the rules of the dialects (the
 * intent walk) are written once, in Python (issue 12).
 *
 * Built against the stable ABI (Python 3.11+); never for a free-threaded interpreter
 * (see the module slots below). The module keeps no state.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Deeper limits are declined: the reference raises or walks its own way past them, and
 * the walks' heap stacks stay small (MAX_DEPTH is 254). */
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

/*
 * Both walks below keep their own stack on the heap: the C stack they use is a few
 * hundred bytes whatever the depth of the value, so a thread with a small stack (musl's
 * 128 KiB, or threading.stack_size) is as safe as the main thread. No Python code runs
 * during a walk (only exact dicts, lists, tuples, str, int and float are read), so the
 * borrowed references they hold cannot be invalidated under them.
 */

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

static void
sort_members(Member *members, Py_ssize_t count)
{
    if (count >= 24) {
        qsort(members, (size_t)count, sizeof(Member), member_compare);
        return;
    }
    for (Py_ssize_t i = 1; i < count; i++) { /* insertion sort: most objects are small */
        Member current = members[i];
        Py_ssize_t j = i;
        while (j > 0 && member_before(&current, &members[j - 1])) {
            members[j] = members[j - 1];
            j--;
        }
        members[j] = current;
    }
}

/* Grow *items (of *capacity elements of size bytes each) to hold at least needed. */
static int
reserve(void **items, Py_ssize_t *capacity, Py_ssize_t needed, size_t size)
{
    if (needed <= *capacity) {
        return DONE;
    }
    Py_ssize_t grown = *capacity ? *capacity : 16;
    while (grown < needed) {
        grown *= 2;
    }
    if ((size_t)grown > PY_SSIZE_T_MAX / size) {
        PyErr_NoMemory();
        return FAILED;
    }
    void *larger = PyMem_Realloc(*items, (size_t)grown * size);
    if (larger == NULL) {
        PyErr_NoMemory();
        return FAILED;
    }
    *items = larger;
    *capacity = grown;
    return DONE;
}

enum { OBJECT, LIST, TUPLE };

/* An open container of the writer: what it is, and how far it has been written. */
typedef struct {
    PyObject *container; /* borrowed */
    Py_ssize_t count;    /* members or items */
    Py_ssize_t next;     /* index of the next one to write */
    Py_ssize_t members;  /* OBJECT: where its sorted members start in Writer.members */
    int kind;
} Frame;

typedef struct {
    Buffer out;
    int limit;
    Frame *frames; /* frames[0 .. depth-1]: the open containers, outermost first */
    Py_ssize_t depth, frame_capacity;
    Member *members; /* the sorted members of every open object, one block each */
    Py_ssize_t members_used, member_capacity;
} Writer;

/* Open a dict: collect its members behind those of the enclosing objects, sorted. */
static int
open_object(Writer *w, PyObject *dict)
{
    Py_ssize_t count = PyDict_Size(dict);
    Py_ssize_t start = w->members_used;
    if (reserve((void **)&w->members, &w->member_capacity, start + count, sizeof(Member)) !=
        DONE) {
        return FAILED;
    }
    Py_ssize_t position = 0, used = 0;
    PyObject *key, *value;
    while (PyDict_Next(dict, &position, &key, &value)) {
        if (used == count || !PyUnicode_CheckExact(key)) {
            return DECLINED; /* a non-str key is written as json.dumps would: Python */
        }
        Py_ssize_t length;
        const char *text = PyUnicode_AsUTF8AndSize(key, &length);
        if (text == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                return FAILED;
            }
            PyErr_Clear();
            return DECLINED; /* a lone surrogate */
        }
        Member *member = &w->members[start + used++];
        member->key = text;
        member->length = length;
        member->value = value;
    }
    sort_members(w->members + start, used);
    w->members_used = start + used;
    Frame *frame = &w->frames[w->depth++];
    *frame = (Frame){dict, used, 0, start, OBJECT};
    return buffer_byte(&w->out, '{');
}

/* Write a scalar, or open a container (its members or items are written later). */
static int
write_or_open(Writer *w, PyObject *value)
{
    Buffer *buf = &w->out;
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
    int kind;
    if (PyDict_CheckExact(value)) {
        kind = OBJECT;
    }
    else if (PyList_CheckExact(value)) {
        kind = LIST;
    }
    else if (PyTuple_CheckExact(value)) {
        kind = TUPLE;
    }
    else {
        return DECLINED; /* subclasses, other mappings, non-JSON values: Python */
    }
    if (w->depth >= w->limit) {
        return DECLINED; /* the reference raises InvalidInputError */
    }
    if (reserve((void **)&w->frames, &w->frame_capacity, w->depth + 1, sizeof(Frame)) != DONE) {
        return FAILED;
    }
    if (kind == OBJECT) {
        return open_object(w, value);
    }
    /* A list written here cannot change size: writing runs no Python code. */
    Py_ssize_t count = kind == LIST ? PyList_Size(value) : PyTuple_Size(value);
    w->frames[w->depth++] = (Frame){value, count, 0, 0, kind};
    return buffer_byte(buf, '[');
}

/* Write the next member or item of the innermost open container, or close it. */
static int
write_next(Writer *w)
{
    Frame *top = &w->frames[w->depth - 1];
    if (top->next == top->count) {
        if (top->kind == OBJECT) {
            w->members_used = top->members;
        }
        w->depth--;
        return buffer_byte(&w->out, top->kind == OBJECT ? '}' : ']');
    }
    if (top->next > 0 && buffer_byte(&w->out, ',') != DONE) {
        return FAILED;
    }
    PyObject *child;
    if (top->kind == OBJECT) {
        const Member *member = &w->members[top->members + top->next];
        if (write_utf8_string(&w->out, member->key, member->length) != DONE ||
            buffer_byte(&w->out, ':') != DONE) {
            return FAILED;
        }
        child = member->value;
    }
    else {
        child = top->kind == LIST ? PyList_GetItem(top->container, top->next)
                                  : PyTuple_GetItem(top->container, top->next);
        if (child == NULL) {
            return FAILED;
        }
    }
    top->next++;
    return write_or_open(w, child); /* may move w->frames: top is not used after this */
}

static int
write_value(Writer *w, PyObject *value)
{
    int status = write_or_open(w, value);
    while (status == DONE && w->depth > 0) {
        status = write_next(w);
    }
    return status;
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
    Writer w = {{NULL, 0, 0}, limit, NULL, 0, 0, NULL, 0, 0};
    status = write_value(&w, args[0]);
    PyObject *result = NULL;
    if (status == DONE) {
        result = PyBytes_FromStringAndSize(w.out.data, w.out.length);
    }
    else if (status == DECLINED) {
        result = Py_NewRef(Py_None);
    }
    PyMem_Free(w.out.data);
    PyMem_Free(w.frames);
    PyMem_Free(w.members);
    return result;
}

/* ---------------------------------------------------------------- nesting */

enum { SHALLOW = 0, TOO_DEEP = 1, UNSURE = 2 };

/* An open container of the nesting check, and where its walk is. */
typedef struct {
    PyObject *container; /* borrowed: an exact dict or list */
    Py_ssize_t position; /* PyDict_Next's position, or the next index of a list */
} Level;

/* The next value inside an open container; 0 when there is none left. */
static int
next_child(Level *level, PyObject **child)
{
    if (PyDict_CheckExact(level->container)) {
        PyObject *key;
        return PyDict_Next(level->container, &level->position, &key, child);
    }
    if (level->position >= PyList_Size(level->container)) {
        return 0;
    }
    *child = PyList_GetItem(level->container, level->position++);
    return 1;
}

/* TOO_DEEP when a container under root (an exact dict or list, at depth 1) nests past
 * limit; the first answer other than SHALLOW ends the walk, in the reference's order:
 * depth first, each container's values in order. A value the reference inspects its own
 * way (a tuple, a Mapping, a subclass) is UNSURE. FAILED when out of memory. */
static int
deeper(PyObject *root, int limit)
{
    if (limit < 1) {
        return TOO_DEEP;
    }
    Level *levels = NULL;
    Py_ssize_t depth = 0, capacity = 0;
    int found = reserve((void **)&levels, &capacity, 1, sizeof(Level));
    if (found == DONE) {
        levels[depth++] = (Level){root, 0};
        found = SHALLOW;
    }
    while (found == SHALLOW && depth > 0) {
        PyObject *child;
        if (!next_child(&levels[depth - 1], &child)) {
            depth--;
        }
        else if (PyDict_CheckExact(child) || PyList_CheckExact(child)) {
            if (depth + 1 > limit) {
                found = TOO_DEEP;
            }
            else if (reserve((void **)&levels, &capacity, depth + 1, sizeof(Level)) != DONE) {
                found = FAILED;
            }
            else {
                levels[depth++] = (Level){child, 0};
            }
        }
        else if (!(PyUnicode_CheckExact(child) || child == Py_None || child == Py_True ||
                   child == Py_False || PyLong_CheckExact(child) ||
                   PyFloat_CheckExact(child))) {
            found = UNSURE;
        }
    }
    PyMem_Free(levels);
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
    switch (deeper(value, limit)) {
    case TOO_DEEP:
        Py_RETURN_TRUE;
    case SHALLOW:
        Py_RETURN_FALSE;
    case FAILED:
        return NULL;
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

/* What holds, and only that: the module keeps no state and no Python object between
 * calls, so every interpreter, each with its own GIL, may load it (a stable-ABI build of
 * 3.11 cannot say so; one built for 3.12+ does). It is not declared safe without a GIL:
 * the walks read containers through borrowed references, which only a GIL keeps valid,
 * so setup.py does not build it for a free-threaded interpreter. */
static PyModuleDef_Slot speedups_slots[] = {
#ifdef Py_mod_multiple_interpreters
    {Py_mod_multiple_interpreters, Py_MOD_PER_INTERPRETER_GIL_SUPPORTED},
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
