/*
 * chat_intent(body, parse_arguments, not_json, fast_loads, fast_max_length, /): the C twin of
 * loopfuse.intent._chat.chat_intent and of the _parts.py helpers it uses.
 *
 * Each static function below mirrors the Python function of the same name, in the same
 * order of statements, so that the two can be read side by side. The result must be
 * *equal* to what Python builds, including the insertion order of every dict (the repr
 * is doctested); when that cannot be guaranteed cheaply the function declines by
 * returning None, and Python computes the intent itself.
 *
 * When to decline. Python's isinstance() and == honour subclasses: a str subclass may
 * override __eq__, __hash__ or __bool__, a dict subclass may override get(), and any
 * object may lie about its __class__. Wherever Python *inspects* a value (a type test, a
 * comparison, a truth test, a dict key) this code therefore accepts only the exact types
 * a JSON parser produces -- dict, list, str, int, float, bool and None -- and declines on
 * anything else (J_FOREIGN below). Parsed bodies hold nothing else, so declining costs
 * nothing in practice. Values Python only copies into the intent are copied by
 * reference, without a check.
 *
 * Reading dicts. Python calls d.get(key) once per key it needs; here each dict of the
 * body is read in one pass (scan) that picks out the keys the caller wants. Parsers give
 * every occurrence of a key the same str object (orjson's key cache, the json module's
 * memo), so after its first match a key is recognised by identity, without the string
 * comparison a lookup would make (the body's key objects are not our interned ones).
 * This is exactly d.get() as long as every key is an exact str (or a number, None or a
 * bool, which never equals a str): any other key declines.
 *
 * References. parse_arguments is arbitrary Python code run in the middle of the walk,
 * so every value read from the body is held as a strong reference while it is used and
 * lists are walked by index, their length read again at every step as a list iterator
 * does: a callback that mutates the body cannot make this code read freed memory. (Such
 * a callback breaks the contract; the intent may then differ from Python's, since each
 * dict is read once, before the callback, where Python reads some keys after it.)
 *
 * Failure. Functions return a new reference or 0 on success, NULL or -1 on failure; a
 * failure is a decline when ctx->declined is set (no exception pending), an exception
 * otherwise. The entry point turns a decline into None.
 *
 * Built against the limited API of Python 3.11 (Py_LIMITED_API=0x030B0000).
 */
#include "_speedups.h"

#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------------------
 * Cached strings: the keys read from the body and the constants the intent is built of.
 * Created once, interned and never released; immutable, so sharing them between
 * sub-interpreters is accepted by this project.
 */

#define LF_STRINGS(X)                                                                      \
    X(arguments) X(assistant) X(call) X(content) X(custom) X(data) X(description)          \
    X(detail) X(developer) X(file_id) X(function) X(function_call)                         \
    X(function_declarations) X(functionDeclarations) X(functions) X(id) X(image)           \
    X(image_url) X(images) X(input) X(input_image) X(input_schema) X(input_text)           \
    X(is_error) X(json) X(messages) X(name) X(output_text) X(parameters)                   \
    X(parameters_json_schema) X(parametersJsonSchema) X(reasoning) X(redacted_thinking)    \
    X(role) X(strict) X(system) X(text) X(thinking) X(tool) X(tool_call_id) X(tool_calls)  \
    X(tool_name) X(tool_result) X(tool_use) X(tool_use_id) X(tools) X(type) X(unknown)     \
    X(url) X(user) X(value)

enum {
#define LF_ENUM(n) LF_S_##n,
    LF_STRINGS(LF_ENUM)
#undef LF_ENUM
    LF_S_empty, /* "" */
    LF_N_STRINGS
};

/* Ctx.owned and Fields.present have one bit per string. */
#define LF_BIT(k) ((uint64_t)1 << (k))
typedef char lf_strings_fit_in_64_bits[LF_N_STRINGS <= 64 ? 1 : -1];

static const char *const string_texts[LF_N_STRINGS] = {
#define LF_TEXT(n) #n,
    LF_STRINGS(LF_TEXT)
#undef LF_TEXT
    "",
};

static PyObject *strings[LF_N_STRINGS];
static Py_ssize_t string_lengths[LF_N_STRINGS];
static int strings_ready;
#ifdef Py_GIL_DISABLED
static PyMutex strings_mutex; /* no GIL serialises the first calls */
#endif

#define S(n) (strings[LF_S_##n])

static int
make_strings(void)
{
    PyObject *made[LF_N_STRINGS];
    for (int i = 0; i < LF_N_STRINGS; i++) {
        made[i] = PyUnicode_InternFromString(string_texts[i]);
        if (made[i] == NULL) {
            while (--i >= 0) {
                Py_DECREF(made[i]);
            }
            return -1;
        }
    }
    for (int i = 0; i < LF_N_STRINGS; i++) {
        strings[i] = made[i];
        string_lengths[i] = PyUnicode_GetLength(made[i]);
    }
    strings_ready = 1;
    return 0;
}

static int
init_strings(void)
{
    int result = 0;
#ifdef Py_GIL_DISABLED
    PyMutex_Lock(&strings_mutex);
#endif
    if (!strings_ready) {
        result = make_strings();
    }
#ifdef Py_GIL_DISABLED
    PyMutex_Unlock(&strings_mutex);
#endif
    return result;
}

/* ------------------------------------------------------------------------------------
 * Types, the walk's state and small helpers
 */

/* What Python's type tests may conclude about a value (see the top comment). */
typedef enum { J_NONE, J_STR, J_DICT, J_LIST, J_SCALAR, J_FOREIGN } JType;

static JType
jtype(PyObject *value)
{
    PyTypeObject *type = Py_TYPE(value);
    if (type == &PyUnicode_Type) {
        return J_STR;
    }
    if (type == &PyDict_Type) {
        return J_DICT;
    }
    if (type == &PyList_Type) {
        return J_LIST;
    }
    if (value == Py_None) {
        return J_NONE;
    }
    if (type == &PyLong_Type || type == &PyFloat_Type || type == &PyBool_Type) {
        return J_SCALAR;
    }
    return J_FOREIGN;
}

/* A growable array of strong references (the linker's ids and names). */
typedef struct {
    PyObject **items;
    Py_ssize_t size, capacity;
} Refs;

static int
refs_append(Refs *refs, PyObject *item)
{
    if (refs->size == refs->capacity) {
        Py_ssize_t capacity = refs->capacity ? 2 * refs->capacity : 4;
        PyObject **items = PyMem_Realloc(refs->items, (size_t)capacity * sizeof(PyObject *));
        if (items == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        refs->items = items;
        refs->capacity = capacity;
    }
    refs->items[refs->size++] = Py_NewRef(item);
    return 0;
}

/* Empty the array, keeping its memory for the next turn. */
static void
refs_reset(Refs *refs)
{
    for (Py_ssize_t i = 0; i < refs->size; i++) {
        Py_DECREF(refs->items[i]);
    }
    refs->size = 0;
}

static void
refs_free(Refs *refs)
{
    refs_reset(refs);
    PyMem_Free(refs->items);
    refs->items = NULL;
    refs->capacity = 0;
}

/* CallLinker: the calls of the last calling turn. */
typedef struct {
    Refs ids;        /* their ids (None: no id); Python: self._ids */
    Refs names;      /* their canonical names, all str; Python: self._names */
    char *used;      /* used[i]: call i already answered; Python: self._used */
    Py_ssize_t used_capacity;
    Py_ssize_t next; /* Python: self._next */
} Linker;

/* One walk: Python's Walk, the linker, the callbacks and the key objects met. */
typedef struct {
    PyObject *parse_arguments; /* borrowed */
    PyObject *not_json;        /* borrowed */
    PyObject *fast_loads;      /* borrowed; NULL when not given or None */
    Py_ssize_t fast_max_length;
    int ok, anthropic, ollama; /* Walk.ok / .anthropic / .ollama */
    int declined;              /* a failure is a decline, not an exception */
    Linker linker;
    Refs spare_ids, spare_names; /* memory for the next assistant turn's ids and names */
    /* known[k]: the last key object of the body found equal to strings[k] (at first
     * strings[k] itself); bit k of `owned`: known[k] is a reference of ours. */
    PyObject *known[LF_N_STRINGS];
    uint64_t owned;
} Ctx;

static int
decline(Ctx *ctx)
{
    ctx->declined = 1;
    return -1;
}

/* value == strings[k], for an exact str value: identity, then length, then bytes. */
static int
str_is(PyObject *value, int k)
{
    return value == strings[k] || (PyUnicode_GetLength(value) == string_lengths[k] &&
                                   PyUnicode_Compare(value, strings[k]) == 0);
}

#define STR_IS(value, n) str_is((value), LF_S_##n)

static int
nonempty_str(PyObject *value)
{
    return PyUnicode_GetLength(value) > 0;
}

/*
 * Reading containers. With the GIL, a borrowed reference stays valid until this code
 * runs Python code, and is then turned into a strong one at once. A free-threaded
 * build has no GIL: another thread may change a body while it is read, so there items
 * come as strong references (PyList_GetItemRef, PyDict_GetItemRef) and a dict is
 * walked inside a critical section on it.
 */
#ifdef Py_GIL_DISABLED
#define LF_BEGIN_READ(d) Py_BEGIN_CRITICAL_SECTION(d)
#define LF_END_READ() Py_END_CRITICAL_SECTION()
#else
#define LF_BEGIN_READ(d) {
#define LF_END_READ() }
#endif

/* d[key] as a new reference, NULL when missing (and on error: check PyErr_Occurred). */
static PyObject *
item_of(PyObject *d, PyObject *key)
{
#ifdef Py_GIL_DISABLED
    PyObject *value;
    PyDict_GetItemRef(d, key, &value);
    return value;
#else
    return Py_XNewRef(PyDict_GetItemWithError(d, key));
#endif
}

/* d.get(key) for the body itself (read once): a new reference, NULL on error. */
static PyObject *
get(PyObject *d, PyObject *key)
{
    PyObject *value = item_of(d, key);
    if (value != NULL) {
        return value;
    }
    return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
}

/* list[i] as a new reference, NULL past the end. Lists are walked by index, their
 * length read again at each step, as a list iterator does. */
static PyObject *
list_item(PyObject *list, Py_ssize_t i)
{
#ifdef Py_GIL_DISABLED
    PyObject *item = PyList_GetItemRef(list, i);
    if (item == NULL) {
        PyErr_Clear(); /* IndexError: the end, as for an iterator */
    }
    return item;
#else
    return i < PyList_Size(list) ? Py_NewRef(PyList_GetItem(list, i)) : NULL;
#endif
}

/* A new dict of two items (values borrowed), in this order. */
static PyObject *
dict2(PyObject *k1, PyObject *v1, PyObject *k2, PyObject *v2)
{
    PyObject *d = PyDict_New();
    if (d != NULL && (PyDict_SetItem(d, k1, v1) < 0 || PyDict_SetItem(d, k2, v2) < 0)) {
        Py_CLEAR(d);
    }
    return d;
}

/* `if value is not None: d[key] = value` */
static int
set_if_not_none(PyObject *d, PyObject *key, PyObject *value)
{
    return value == Py_None ? 0 : PyDict_SetItem(d, key, value);
}

/* list.append(item), stealing the reference to item (NULL: the failure passes on). */
static int
append_new(PyObject *list, PyObject *item)
{
    int result;
    if (item == NULL) {
        return -1;
    }
    result = PyList_Append(list, item);
    Py_DECREF(item);
    return result;
}

/* {"type": "json", "value": value}: junk kept as it is. */
static PyObject *
json_part(PyObject *value)
{
    return dict2(S(type), S(json), S(value), value);
}

/* ------------------------------------------------------------------------------------
 * Fields: one pass over a dict instead of a d.get() per key (see the top comment)
 */

typedef struct {
    uint64_t present;          /* bit k: the dict holds strings[k] */
    PyObject *v[LF_N_STRINGS]; /* v[k]: a new reference to d[strings[k]] when present */
} Fields;

/* The keys each kind of dict is read for. A key the body often holds but the walk never
 * reads (OpenAI's "type": "function" on a call) is listed too: recognised by identity
 * it costs nothing, unrecognised it costs a string comparison at every occurrence. */
#define LF_KEYS(name, ...) static const unsigned char name[] = {__VA_ARGS__}
LF_KEYS(MESSAGE_KEYS, LF_S_role, LF_S_content, LF_S_tool_calls, LF_S_tool_call_id,
        LF_S_thinking, LF_S_function_call, LF_S_tool_name, LF_S_name, LF_S_images);
LF_KEYS(BLOCK_KEYS, LF_S_type, LF_S_text, LF_S_thinking, LF_S_image_url, LF_S_file_id,
        LF_S_detail, LF_S_name, LF_S_input, LF_S_id, LF_S_tool_use_id, LF_S_content,
        LF_S_is_error);
LF_KEYS(PART_KEYS, LF_S_type, LF_S_text, LF_S_thinking, LF_S_image_url, LF_S_file_id,
        LF_S_detail);
LF_KEYS(IMAGE_KEYS, LF_S_url, LF_S_detail);
LF_KEYS(RAW_CALL_KEYS, LF_S_id, LF_S_type, LF_S_function, LF_S_custom, LF_S_name,
        LF_S_arguments);
LF_KEYS(FUNCTION_KEYS, LF_S_name, LF_S_arguments, LF_S_input);
LF_KEYS(TOOL_KEYS, LF_S_type, LF_S_function, LF_S_functionDeclarations,
        LF_S_function_declarations, LF_S_input_schema, LF_S_name, LF_S_description,
        LF_S_parameters, LF_S_strict, LF_S_parametersJsonSchema, LF_S_parameters_json_schema);
LF_KEYS(DECLARATION_KEYS, LF_S_name, LF_S_description, LF_S_parameters, LF_S_strict,
        LF_S_parametersJsonSchema, LF_S_parameters_json_schema);
#undef LF_KEYS

#define SCAN(ctx, d, keys, fields) scan((ctx), (d), (keys), (int)sizeof(keys), (fields))

/* d.get(name), borrowed from the fields */
#define FIELD(f, n) field_at((f), LF_S_##n)
/* name in d */
#define HAS(f, n) (((f)->present & LF_BIT(LF_S_##n)) != 0)

static PyObject *
field_at(Fields *f, int k)
{
    return f->present & LF_BIT(k) ? f->v[k] : Py_None;
}

/* Index of the lowest bit set in a non-zero mask. */
static int
lowest_bit(uint64_t mask)
{
#if defined(__GNUC__) || defined(__clang__)
    return __builtin_ctzll(mask);
#else
    int k = 0;
    while (!(mask & 1)) {
        mask >>= 1;
        k++;
    }
    return k;
#endif
}

static void
release(Fields *f)
{
    while (f->present) {
        int k = lowest_bit(f->present);
        f->present &= f->present - 1;
        Py_DECREF(f->v[k]);
    }
}

/* The wanted key `key` equals, -1 for none, -2 to decline (a key Python compares with
 * its own __eq__). */
static int
match_key(Ctx *ctx, PyObject *key, const unsigned char *keys, int count)
{
    Py_ssize_t length;
    for (int i = 0; i < count; i++) {
        if (key == ctx->known[keys[i]]) {
            return keys[i];
        }
    }
    switch (jtype(key)) {
    case J_STR:
        break;
    case J_NONE:
    case J_SCALAR: /* equal to no str */
        return -1;
    default:
        return -2;
    }
    length = PyUnicode_GetLength(key);
    for (int i = 0; i < count; i++) {
        int k = keys[i];
        if (string_lengths[k] == length && PyUnicode_Compare(key, strings[k]) == 0) {
            if (ctx->owned & LF_BIT(k)) {
                Py_DECREF(ctx->known[k]);
            }
            ctx->known[k] = Py_NewRef(key); /* the next occurrence matches by identity */
            ctx->owned |= LF_BIT(k);
            return k;
        }
    }
    return -1;
}

/* Read the wanted keys of the exact dict d into f; release(f) afterwards, also after a
 * failure. No Python code runs during the pass, so the borrowed references PyDict_Next
 * hands out stay valid. */
static int
scan(Ctx *ctx, PyObject *d, const unsigned char *keys, int count, Fields *f)
{
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    int result = 0;
    f->present = 0;
    LF_BEGIN_READ(d);
    while (PyDict_Next(d, &pos, &key, &value)) {
        int k = match_key(ctx, key, keys, count);
        if (k >= 0 && !(f->present & LF_BIT(k))) { /* (equal str keys are one key) */
            f->v[k] = Py_NewRef(value);
            f->present |= LF_BIT(k);
        }
        else if (k == -2) {
            result = decline(ctx);
            break;
        }
    }
    LF_END_READ();
    return result;
}

/* ------------------------------------------------------------------------------------
 * _parts.without_volatile
 */

#define LF_KEY(text) {sizeof(text) - 1, text}
static const struct {
    Py_ssize_t length;
    const char *text;
} volatile_keys[] = {
    /* _parts.VOLATILE_KEYS */
    LF_KEY("id"),
    LF_KEY("call_id"),
    LF_KEY("tool_call_id"),
    LF_KEY("tool_use_id"),
    LF_KEY("cache_control"),
    LF_KEY("signature"),
    LF_KEY("thoughtSignature"),
    LF_KEY("thought_signature"),
    LF_KEY("encrypted_content"),
    LF_KEY("status"),
};
#undef LF_KEY

/* key in VOLATILE_KEYS, for an exact str key; the length test rejects most keys. */
static int
is_volatile(PyObject *key)
{
    Py_ssize_t length = PyUnicode_GetLength(key);
    for (size_t i = 0; i < sizeof volatile_keys / sizeof volatile_keys[0]; i++) {
        if (volatile_keys[i].length == length &&
            PyUnicode_CompareWithASCIIString(key, volatile_keys[i].text) == 0) {
            return 1;
        }
    }
    return 0;
}

/*
 * without_volatile(value): a copy without the volatile keys. With `declarations`, also
 * without "functionDeclarations" / "function_declarations": the `rest` of a Gemini tool
 * that tool_declarations appends when it is non-empty.
 */
static PyObject *
copy_without(Ctx *ctx, PyObject *value, int declarations)
{
    PyObject *out = PyDict_New();
    PyObject *key, *item;
    Py_ssize_t pos = 0;
    int failed = 0;
    if (out == NULL) {
        return NULL;
    }
    LF_BEGIN_READ(value);
    while (!failed && PyDict_Next(value, &pos, &key, &item)) {
        switch (jtype(key)) {
        case J_STR:
            if (declarations &&
                (STR_IS(key, functionDeclarations) || STR_IS(key, function_declarations))) {
                continue;
            }
            if (is_volatile(key)) {
                continue;
            }
            break;
        case J_NONE:
        case J_SCALAR: /* equal to no str */
            break;
        default: /* not reached: the dict was scanned before, which declines first */
            failed = decline(ctx);
            continue;
        }
        failed = PyDict_SetItem(out, key, item);
    }
    LF_END_READ();
    if (failed) {
        Py_DECREF(out);
        return NULL;
    }
    return out;
}

/* ------------------------------------------------------------------------------------
 * _parts.add_part / content_parts
 */

/* add_part's `image_url` branch: {"type": "image", "url": ..., "detail"?: ...}. */
static PyObject *
image_url_part(Ctx *ctx, PyObject *image)
{
    Fields f;
    PyObject *canon = NULL;
    switch (jtype(image)) {
    case J_FOREIGN:
        decline(ctx);
        return NULL;
    case J_DICT:
        if (SCAN(ctx, image, IMAGE_KEYS, &f) == 0 &&
            (canon = dict2(S(type), S(image), S(url), FIELD(&f, url))) != NULL &&
            set_if_not_none(canon, S(detail), FIELD(&f, detail)) < 0) {
            Py_CLEAR(canon);
        }
        release(&f);
        return canon;
    default:
        return dict2(S(type), S(image), S(url), image);
    }
}

/* add_part's `input_image` branch: {"type": "image"}, then url, file_id and detail when
 * not None. */
static PyObject *
input_image_part(Fields *part)
{
    PyObject *canon = PyDict_New();
    if (canon != NULL && (PyDict_SetItem(canon, S(type), S(image)) < 0 ||
                          set_if_not_none(canon, S(url), FIELD(part, image_url)) < 0 ||
                          set_if_not_none(canon, S(file_id), FIELD(part, file_id)) < 0 ||
                          set_if_not_none(canon, S(detail), FIELD(part, detail)) < 0)) {
        Py_CLEAR(canon);
    }
    return canon;
}

/* add_part for a dict `part` already read into f (PART_KEYS or more). */
static int
add_dict_part(Ctx *ctx, PyObject *out, PyObject *part, Fields *f)
{
    PyObject *kind = FIELD(f, type), *field;
    switch (jtype(kind)) { /* kind = str_field(part, "type") */
    case J_STR:
        break;
    case J_FOREIGN:
        return decline(ctx);
    default:
        kind = NULL; /* None: no branch below but the last */
    }
    if (kind == NULL) {
        /* kept below */
    }
    else if (STR_IS(kind, text) || STR_IS(kind, input_text) || STR_IS(kind, output_text)) {
        field = FIELD(f, text);
        switch (jtype(field)) {
        case J_STR: /* annotations, citations, cache_control: not the ask */
            return nonempty_str(field) ? PyList_Append(out, field) : 0;
        case J_FOREIGN:
            return decline(ctx);
        default:
            break; /* not text after all: kept below */
        }
    }
    else if (STR_IS(kind, thinking)) {
        field = FIELD(f, thinking);
        switch (jtype(field)) {
        case J_STR:
            return nonempty_str(field)
                       ? append_new(out, dict2(S(type), S(thinking), S(text), field))
                       : 0;
        case J_FOREIGN:
            return decline(ctx);
        default:
            return 0;
        }
    }
    else if (STR_IS(kind, redacted_thinking) || STR_IS(kind, reasoning)) {
        return 0; /* encrypted or redacted reasoning: opaque, and regenerated per call */
    }
    else if (STR_IS(kind, image_url)) {
        return append_new(out, image_url_part(ctx, FIELD(f, image_url)));
    }
    else if (STR_IS(kind, input_image)) {
        return append_new(out, input_image_part(f));
    }
    return append_new(out, copy_without(ctx, part, 0));
}

/* add_part: append the canonical form of one content part (or nothing). */
static int
add_part(Ctx *ctx, PyObject *out, PyObject *part)
{
    Fields f;
    int result;
    switch (jtype(part)) {
    case J_STR:
        return nonempty_str(part) ? PyList_Append(out, part) : 0;
    case J_FOREIGN:
        return decline(ctx);
    case J_DICT:
        break;
    default:
        return append_new(out, json_part(part));
    }
    result = SCAN(ctx, part, PART_KEYS, &f);
    if (result == 0) {
        result = add_dict_part(ctx, out, part, &f);
    }
    release(&f);
    return result;
}

/* content_parts(content), appended to `out` (a leading system message extends). */
static int
content_parts_into(Ctx *ctx, PyObject *out, PyObject *content)
{
    PyObject *part;
    switch (jtype(content)) {
    case J_STR:
        return nonempty_str(content) ? PyList_Append(out, content) : 0;
    case J_NONE:
        return 0;
    case J_FOREIGN:
        return decline(ctx);
    case J_LIST:
        for (Py_ssize_t i = 0; (part = list_item(content, i)) != NULL; i++) {
            int result = add_part(ctx, out, part);
            Py_DECREF(part);
            if (result < 0) {
                return -1;
            }
        }
        return 0;
    default:
        return add_part(ctx, out, content);
    }
}

/* content_parts(content): a new list. */
static PyObject *
content_parts(Ctx *ctx, PyObject *content)
{
    PyObject *out;
    if (PyUnicode_CheckExact(content) && nonempty_str(content)) {
        /* the common case: [content], allocated at its size */
        if ((out = PyList_New(1)) != NULL) {
            PyList_SetItem(out, 0, Py_NewRef(content));
        }
        return out;
    }
    out = PyList_New(0);
    if (out != NULL && content_parts_into(ctx, out, content) < 0) {
        Py_CLEAR(out);
    }
    return out;
}

/* ------------------------------------------------------------------------------------
 * _parts.tool_declarations / _function
 */

/* _function(declaration, schema_key), the declaration read into f:
 * {"name", "description"?, "parameters"?, "strict"?}. */
static PyObject *
function_declaration(Fields *f, int schema_key)
{
    PyObject *schema = field_at(f, schema_key);
    PyObject *canon;
    if (schema == Py_None && schema_key == LF_S_parameters) {
        schema = HAS(f, parametersJsonSchema) ? FIELD(f, parametersJsonSchema)
                                               : FIELD(f, parameters_json_schema);
    }
    canon = PyDict_New();
    if (canon != NULL && (PyDict_SetItem(canon, S(name), FIELD(f, name)) < 0 ||
                          set_if_not_none(canon, S(description), FIELD(f, description)) < 0 ||
                          set_if_not_none(canon, S(parameters), schema) < 0 ||
                          set_if_not_none(canon, S(strict), FIELD(f, strict)) < 0)) {
        Py_CLEAR(canon);
    }
    return canon;
}

/* _function(declaration, "parameters") for an exact dict not read yet. */
static PyObject *
declaration_of(Ctx *ctx, PyObject *declaration)
{
    Fields f;
    PyObject *canon = NULL;
    if (SCAN(ctx, declaration, DECLARATION_KEYS, &f) == 0) {
        canon = function_declaration(&f, LF_S_parameters);
    }
    release(&f);
    return canon;
}

/* The Gemini branch: each of `declarations`, then the rest of the tool when any. */
static int
gemini_declarations(Ctx *ctx, PyObject *out, PyObject *tool, PyObject *declarations)
{
    PyObject *declaration, *rest;
    for (Py_ssize_t i = 0; (declaration = list_item(declarations, i)) != NULL; i++) {
        int result;
        switch (jtype(declaration)) {
        case J_DICT:
            result = append_new(out, declaration_of(ctx, declaration));
            break;
        case J_FOREIGN:
            result = decline(ctx);
            break;
        default:
            result = append_new(out, json_part(declaration));
        }
        Py_DECREF(declaration);
        if (result < 0) {
            return -1;
        }
    }
    if ((rest = copy_without(ctx, tool, 1)) == NULL) {
        return -1;
    }
    if (PyDict_Size(rest) == 0) { /* nothing but declarations and volatile keys */
        Py_DECREF(rest);
        return 0;
    }
    return append_new(out, rest);
}

/* One dict of tool_declarations, read into f. */
static int
add_tool(Ctx *ctx, PyObject *out, PyObject *tool, Fields *f)
{
    PyObject *function = FIELD(f, function);
    PyObject *declarations = HAS(f, functionDeclarations) ? FIELD(f, functionDeclarations)
                                                           : FIELD(f, function_declarations);
    PyObject *type = FIELD(f, type);
    JType function_kind = jtype(function), declarations_kind = jtype(declarations);
    if (function_kind == J_FOREIGN || declarations_kind == J_FOREIGN ||
        jtype(type) == J_FOREIGN) {
        return decline(ctx); /* isinstance / == could run their code */
    }
    if (function_kind == J_DICT) {
        return append_new(out, declaration_of(ctx, function));
    }
    if (declarations_kind == J_LIST) {
        return gemini_declarations(ctx, out, tool, declarations);
    }
    if (HAS(f, input_schema)) {
        return append_new(out, function_declaration(f, LF_S_input_schema));
    }
    if (PyUnicode_CheckExact(type) && STR_IS(type, function) && HAS(f, name)) {
        return append_new(out, function_declaration(f, LF_S_parameters));
    }
    return append_new(out, copy_without(ctx, tool, 0)); /* a built-in tool */
}

/* tool_declarations(tools): a new list. */
static PyObject *
tool_declarations(Ctx *ctx, PyObject *tools)
{
    PyObject *out = PyList_New(0), *tool;
    if (out == NULL) {
        return NULL;
    }
    switch (jtype(tools)) {
    case J_NONE:
        return out;
    case J_FOREIGN:
        decline(ctx);
        goto fail;
    case J_LIST:
        break;
    default:
        if (append_new(out, json_part(tools)) < 0) {
            goto fail;
        }
        return out;
    }
    for (Py_ssize_t i = 0; (tool = list_item(tools, i)) != NULL; i++) {
        Fields f;
        int result;
        switch (jtype(tool)) {
        case J_DICT:
            result = SCAN(ctx, tool, TOOL_KEYS, &f);
            if (result == 0) {
                result = add_tool(ctx, out, tool, &f);
            }
            release(&f);
            break;
        case J_FOREIGN:
            result = decline(ctx);
            break;
        default:
            result = append_new(out, json_part(tool));
        }
        Py_DECREF(tool);
        if (result < 0) {
            goto fail;
        }
    }
    return out;
fail:
    Py_DECREF(out);
    return NULL;
}

/* ------------------------------------------------------------------------------------
 * _parts.CallLinker
 */

/* An assistant turn's calls (Python: the lists calls, ids and [c["name"] for c in calls]).
 * The arrays of ids and names are recycled from turn to turn: most bodies then allocate
 * them once. */
typedef struct {
    PyObject *calls; /* list, made at the first call */
    Refs ids, names;
} Turn;

static Turn
turn_start(Ctx *ctx)
{
    Turn turn = {NULL, ctx->spare_ids, ctx->spare_names};
    ctx->spare_ids = ctx->spare_names = (Refs){NULL, 0, 0};
    return turn;
}

static void
turn_end(Ctx *ctx, Turn *turn)
{
    Py_CLEAR(turn->calls);
    refs_reset(&turn->ids);
    refs_reset(&turn->names);
    ctx->spare_ids = turn->ids;
    ctx->spare_names = turn->names;
}

/* start_turn(ids, names): the linker takes the turn's ids and names, and gives the turn
 * its old arrays. */
static int
linker_start_turn(Linker *linker, Turn *turn)
{
    Py_ssize_t count = turn->ids.size;
    Refs ids = linker->ids, names = linker->names;
    if (count > linker->used_capacity) {
        char *used = PyMem_Realloc(linker->used, (size_t)count);
        if (used == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        linker->used = used;
        linker->used_capacity = count;
    }
    if (count > 0) {
        memset(linker->used, 0, (size_t)count);
    }
    refs_reset(&ids);
    refs_reset(&names);
    linker->ids = turn->ids;
    linker->names = turn->names;
    turn->ids = ids;
    turn->names = names;
    linker->next = 0;
    return 0;
}

static void
ctx_free(Ctx *ctx)
{
    refs_free(&ctx->linker.ids);
    refs_free(&ctx->linker.names);
    PyMem_Free(ctx->linker.used);
    ctx->linker.used = NULL;
    refs_free(&ctx->spare_ids);
    refs_free(&ctx->spare_names);
    for (int k = 0; k < LF_N_STRINGS; k++) {
        if (ctx->owned & LF_BIT(k)) {
            Py_DECREF(ctx->known[k]);
        }
    }
    ctx->owned = 0;
}

/* _find: the index of the call answered, -1 for None, -2 to decline. */
static Py_ssize_t
linker_find(Ctx *ctx, PyObject *result_id, PyObject *name)
{
    Linker *linker = &ctx->linker;
    Py_ssize_t count = linker->ids.size;
    JType id_kind = jtype(result_id), name_kind = jtype(name);
    if (id_kind == J_FOREIGN || name_kind == J_FOREIGN) {
        decline(ctx); /* isinstance / == could run their code */
        return -2;
    }
    if (id_kind == J_STR && nonempty_str(result_id)) {
        /* ids.count(result_id) != 1 -> None, else ids.index(result_id). The ids are of
         * exact JSON types (tool_call declines on others): only a str may equal it. */
        Py_ssize_t found = -1, matches = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            PyObject *id = linker->ids.items[i];
            if (PyUnicode_CheckExact(id) &&
                PyObject_RichCompareBool(id, result_id, Py_EQ) == 1 && matches++ == 0) {
                found = i;
            }
        }
        return matches == 1 ? found : -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        if (linker->ids.items[i] != Py_None) {
            return -1; /* the calls had ids and this result has none: ambiguous */
        }
    }
    if (name_kind == J_STR && nonempty_str(name)) {
        for (Py_ssize_t i = 0; i < count; i++) {
            if (!linker->used[i] &&
                PyObject_RichCompareBool(linker->names.items[i], name, Py_EQ) == 1) {
                return i;
            }
        }
        return -1;
    }
    if (linker->next < count && !linker->used[linker->next]) {
        return linker->next;
    }
    /* Order broken by an earlier result linked by name: the first call still open. */
    for (Py_ssize_t i = 0; i < count; i++) {
        if (!linker->used[i]) {
            return i;
        }
    }
    return -1;
}

/* link(result_id, name): a new reference to the index (an int) or None. */
static PyObject *
linker_link(Ctx *ctx, PyObject *result_id, PyObject *name)
{
    Py_ssize_t index = linker_find(ctx, result_id, name);
    if (index == -2) {
        return NULL;
    }
    ctx->linker.next++;
    if (index == -1) {
        return Py_NewRef(Py_None);
    }
    ctx->linker.used[index] = 1;
    return PyLong_FromSsize_t(index);
}

/* ------------------------------------------------------------------------------------
 * _parts.parse_arguments / tool_call
 */

/* parse_arguments(arguments) for an exact str, through the caller's callback. */
static PyObject *
parse_arguments(Ctx *ctx, PyObject *arguments)
{
    PyObject *parsed, *value;
    int trusted;
    if (ctx->fast_loads != NULL && PyUnicode_GetLength(arguments) <= ctx->fast_max_length) {
        /* The caller vouches that a value fast_loads returns for a string this short is
         * what parse_arguments returns, trusted; it saves two Python frames a call. */
        value = PyObject_CallFunctionObjArgs(ctx->fast_loads, arguments, NULL);
        if (value != NULL) {
            return value;
        }
        if (!PyErr_ExceptionMatches(PyExc_ValueError)) {
            return NULL;
        }
        PyErr_Clear(); /* not JSON to it: parse_arguments decides (NaN, surrogates, ...) */
    }
    parsed = PyObject_CallFunctionObjArgs(ctx->parse_arguments, arguments, NULL);
    if (parsed == NULL) {
        return NULL;
    }
    if (!PyTuple_CheckExact(parsed) || PyTuple_Size(parsed) != 2) {
        PyErr_SetString(PyExc_TypeError, "parse_arguments must return a (value, trusted) tuple");
        Py_DECREF(parsed);
        return NULL;
    }
    value = PyTuple_GetItem(parsed, 0);
    if (value == ctx->not_json) {
        Py_DECREF(parsed);
        return Py_NewRef(arguments); /* not JSON: kept as sent */
    }
    trusted = PyObject_IsTrue(PyTuple_GetItem(parsed, 1));
    if (trusted < 0) {
        Py_DECREF(parsed);
        return NULL;
    }
    if (!trusted) {
        ctx->ok = 0;
    }
    Py_INCREF(value);
    Py_DECREF(parsed);
    return value;
}

/* calls.append({"name": name, "arguments": arguments}); ids.append(id) */
static int
turn_add(Turn *turn, PyObject *name, PyObject *arguments, PyObject *id)
{
    if (turn->calls == NULL && (turn->calls = PyList_New(0)) == NULL) {
        return -1;
    }
    if (append_new(turn->calls, dict2(S(name), name, S(arguments), arguments)) < 0 ||
        refs_append(&turn->ids, id) < 0 || refs_append(&turn->names, name) < 0) {
        return -1;
    }
    return 0;
}

/* calls.append(tool_call(name, arguments, walk)); ids.append(id) */
static int
tool_call(Ctx *ctx, Turn *turn, PyObject *name, PyObject *arguments, PyObject *id)
{
    PyObject *value;
    int result;
    JType name_kind = jtype(name), arguments_kind = jtype(arguments);
    /* The id is compared with result ids later (CallLinker._find): exact types only. */
    if (name_kind == J_FOREIGN || arguments_kind == J_FOREIGN || jtype(id) == J_FOREIGN) {
        return decline(ctx);
    }
    if (arguments_kind == J_NONE) {
        value = PyDict_New();
    }
    else if (arguments_kind == J_STR) {
        value = parse_arguments(ctx, arguments);
    }
    else {
        value = Py_NewRef(arguments);
    }
    if (value == NULL) {
        return -1;
    }
    result = turn_add(turn, name_kind == J_STR ? name : S(empty), value, id);
    Py_DECREF(value);
    return result;
}

/* ------------------------------------------------------------------------------------
 * _chat._assistant
 */

/* One block of a list content: an Anthropic tool_use becomes a call, the rest parts. */
static int
assistant_block(Ctx *ctx, Turn *turn, PyObject *parts, PyObject *block)
{
    Fields f;
    PyObject *kind;
    int result;
    if (jtype(block) != J_DICT) {
        return add_part(ctx, parts, block); /* kind None (or a foreign type: declines) */
    }
    if (SCAN(ctx, block, BLOCK_KEYS, &f) < 0) {
        result = -1;
    }
    else if (jtype(kind = FIELD(&f, type)) == J_FOREIGN) {
        result = decline(ctx); /* kind == "tool_use" could run its __eq__ */
    }
    else if (PyUnicode_CheckExact(kind) && STR_IS(kind, tool_use)) { /* Anthropic */
        result = tool_call(ctx, turn, FIELD(&f, name), FIELD(&f, input), FIELD(&f, id));
        ctx->anthropic = 1;
    }
    else {
        if (PyUnicode_CheckExact(kind) &&
            (STR_IS(kind, thinking) || STR_IS(kind, redacted_thinking))) {
            ctx->anthropic = 1;
        }
        result = add_dict_part(ctx, parts, block, &f);
    }
    release(&f);
    return result;
}

/* The message's content, into parts (and calls); a str content is there already. */
static int
assistant_content(Ctx *ctx, Turn *turn, PyObject *parts, PyObject *content)
{
    PyObject *block;
    switch (jtype(content)) {
    case J_STR: /* the common case: already in parts (see assistant) */
        return 0;
    case J_NONE:
        return 0;
    case J_FOREIGN:
        return decline(ctx);
    case J_LIST:
        for (Py_ssize_t i = 0; (block = list_item(content, i)) != NULL; i++) {
            int result = assistant_block(ctx, turn, parts, block);
            Py_DECREF(block);
            if (result < 0) {
                return -1;
            }
        }
        return 0;
    default:
        return add_part(ctx, parts, content);
    }
}

/* Ollama keeps reasoning beside the content: it goes first among the parts. */
static int
assistant_thinking(Ctx *ctx, PyObject *parts, PyObject *thinking)
{
    PyObject *part;
    int result;
    switch (jtype(thinking)) {
    case J_FOREIGN:
        return decline(ctx);
    case J_STR:
        break;
    default:
        return 0;
    }
    ctx->ollama = 1;
    if (!nonempty_str(thinking)) {
        return 0;
    }
    if ((part = dict2(S(type), S(thinking), S(text), thinking)) == NULL) {
        return -1;
    }
    result = PyList_Insert(parts, 0, part);
    Py_DECREF(part);
    return result;
}

/* A call whose name and arguments are in a dict ({"function": {...}} / {"custom": ...}
 * or the legacy function_call); `arguments` was read by the caller. */
static int
function_call(Ctx *ctx, Turn *turn, Fields *function, PyObject *arguments, PyObject *id)
{
    return tool_call(ctx, turn, FIELD(function, name), arguments, id);
}

/* One element of tool_calls: OpenAI {"function": {...}}, custom {"custom": {...}},
 * Ollama (object arguments), or flat {"name", "arguments"}. */
static int
assistant_raw_call(Ctx *ctx, Turn *turn, PyObject *raw)
{
    Fields f, ff;
    PyObject *function, *arguments;
    int result;
    switch (jtype(raw)) {
    case J_FOREIGN:
        return decline(ctx);
    case J_DICT:
        break;
    default:
        return turn_add(turn, S(empty), raw, Py_None);
    }
    if (SCAN(ctx, raw, RAW_CALL_KEYS, &f) < 0) {
        release(&f);
        return -1;
    }
    function = FIELD(&f, function);
    if (function == Py_None) {
        function = FIELD(&f, custom); /* OpenAI custom tools: {"name", "input"} */
    }
    switch (jtype(function)) {
    case J_FOREIGN:
        result = decline(ctx);
        break;
    case J_DICT:
        result = SCAN(ctx, function, FUNCTION_KEYS, &ff);
        if (result == 0) {
            arguments = FIELD(&ff, arguments);
            if (arguments == Py_None) {
                arguments = FIELD(&ff, input);
            }
            else if (PyDict_CheckExact(arguments)) {
                ctx->ollama = 1; /* Ollama sends arguments as an object */
            }
            result = function_call(ctx, turn, &ff, arguments, FIELD(&f, id));
        }
        release(&ff);
        break;
    default:
        result = tool_call(ctx, turn, FIELD(&f, name), FIELD(&f, arguments), FIELD(&f, id));
    }
    release(&f);
    return result;
}

static int
assistant_tool_calls(Ctx *ctx, Turn *turn, PyObject *raw_calls)
{
    PyObject *raw;
    switch (jtype(raw_calls)) {
    case J_NONE:
        return 0;
    case J_FOREIGN:
        return decline(ctx);
    case J_LIST:
        for (Py_ssize_t i = 0; (raw = list_item(raw_calls, i)) != NULL; i++) {
            int result = assistant_raw_call(ctx, turn, raw);
            Py_DECREF(raw);
            if (result < 0) {
                return -1;
            }
        }
        return 0;
    default:
        return turn_add(turn, S(empty), raw_calls, Py_None);
    }
}

/* The legacy OpenAI function_call: one more call, without an id. */
static int
assistant_function_call(Ctx *ctx, Turn *turn, PyObject *legacy)
{
    Fields f;
    int result;
    switch (jtype(legacy)) {
    case J_FOREIGN:
        return decline(ctx);
    case J_DICT:
        break;
    default:
        return 0;
    }
    result = SCAN(ctx, legacy, FUNCTION_KEYS, &f);
    if (result == 0) {
        result = function_call(ctx, turn, &f, FIELD(&f, arguments), Py_None);
    }
    release(&f);
    return result;
}

/* _assistant(message, linker, walk), the message read into m. */
static PyObject *
assistant(Ctx *ctx, Fields *m)
{
    Turn turn = turn_start(ctx);
    PyObject *content = FIELD(m, content), *canon = NULL, *parts;
    /* A str content is the common case: the list is made at its size. */
    parts = PyUnicode_CheckExact(content) ? content_parts(ctx, content) : PyList_New(0);
    if (parts == NULL || assistant_content(ctx, &turn, parts, content) < 0 ||
        assistant_thinking(ctx, parts, FIELD(m, thinking)) < 0 ||
        assistant_tool_calls(ctx, &turn, FIELD(m, tool_calls)) < 0 ||
        assistant_function_call(ctx, &turn, FIELD(m, function_call)) < 0) {
        goto done;
    }
    if ((canon = dict2(S(role), S(assistant), S(content), parts)) != NULL &&
        turn.calls != NULL &&
        (PyDict_SetItem(canon, S(tool_calls), turn.calls) < 0 ||
         linker_start_turn(&ctx->linker, &turn) < 0)) {
        Py_CLEAR(canon);
    }
done:
    Py_XDECREF(parts);
    turn_end(ctx, &turn);
    return canon;
}

/* ------------------------------------------------------------------------------------
 * _chat._tool_result, the legacy function result, _user and _images
 */

/* {"role": "tool", "call": call, "content": content, "name": name (unless NULL)};
 * steals call and content (NULL: a failure passes on). */
static PyObject *
tool_message(PyObject *call, PyObject *content, PyObject *name)
{
    PyObject *result = NULL;
    if (call != NULL && content != NULL && (result = PyDict_New()) != NULL &&
        (PyDict_SetItem(result, S(role), S(tool)) < 0 ||
         PyDict_SetItem(result, S(call), call) < 0 ||
         PyDict_SetItem(result, S(content), content) < 0 ||
         (name != NULL && PyDict_SetItem(result, S(name), name) < 0))) {
        Py_CLEAR(result);
    }
    Py_XDECREF(call);
    Py_XDECREF(content);
    return result;
}

/* _tool_result: a `tool` message (OpenAI tool_call_id, Ollama tool_name). */
static PyObject *
tool_result(Ctx *ctx, Fields *m)
{
    PyObject *name = HAS(m, tool_name) ? FIELD(m, tool_name) : FIELD(m, name);
    PyObject *call = linker_link(ctx, FIELD(m, tool_call_id), name); /* declines on a
                                                                        foreign name */
    if (call == NULL) {
        return NULL;
    }
    return tool_message(call, content_parts(ctx, FIELD(m, content)),
                        PyUnicode_CheckExact(name) ? name : NULL);
}

/* A legacy OpenAI `function` message: linked by name, or by order. */
static PyObject *
function_result(Ctx *ctx, Fields *m)
{
    PyObject *name = FIELD(m, name), *call;
    switch (jtype(name)) {
    case J_FOREIGN:
        decline(ctx);
        return NULL;
    case J_STR:
        break;
    default:
        name = NULL;
    }
    if ((call = linker_link(ctx, Py_None, name != NULL ? name : S(empty))) == NULL) {
        return NULL;
    }
    return tool_message(call, content_parts(ctx, FIELD(m, content)), name);
}

/* _images: Ollama's base64 images beside the text, as image parts. */
static int
images(Ctx *ctx, PyObject *images, PyObject *parts)
{
    PyObject *image;
    switch (jtype(images)) {
    case J_FOREIGN:
        return decline(ctx);
    case J_LIST:
        break;
    default:
        return 0;
    }
    for (Py_ssize_t i = 0; (image = list_item(images, i)) != NULL; i++) {
        /* only copied: no check */
        int result = append_new(parts, dict2(S(type), S(image), S(data), image));
        Py_DECREF(image);
        if (result < 0) {
            return -1;
        }
    }
    return 0;
}

/* An Anthropic tool_result block, read into f: a `tool` message of its own. */
static PyObject *
anthropic_result(Ctx *ctx, Fields *f)
{
    PyObject *call = linker_link(ctx, FIELD(f, tool_use_id), Py_None), *result;
    if (call == NULL) {
        return NULL;
    }
    result = tool_message(call, content_parts(ctx, FIELD(f, content)), NULL);
    if (result != NULL && FIELD(f, is_error) == Py_True &&
        PyDict_SetItem(result, S(is_error), Py_True) < 0) {
        Py_CLEAR(result);
    }
    return result;
}

/* One block of a user message's list content; *results counts its tool_result blocks. */
static int
user_block(Ctx *ctx, PyObject *messages, PyObject *parts, PyObject *block, int *results)
{
    Fields f;
    PyObject *kind;
    int result;
    if (jtype(block) != J_DICT) {
        return add_part(ctx, parts, block); /* kind None (or a foreign type: declines) */
    }
    if (SCAN(ctx, block, BLOCK_KEYS, &f) < 0) {
        result = -1;
    }
    else if (jtype(kind = FIELD(&f, type)) == J_FOREIGN) {
        result = decline(ctx); /* kind == "tool_result" could run its __eq__ */
    }
    else if (PyUnicode_CheckExact(kind) && STR_IS(kind, tool_result)) {
        ctx->anthropic = 1;
        ++*results;
        result = append_new(messages, anthropic_result(ctx, &f));
    }
    else {
        if (PyUnicode_CheckExact(kind) &&
            (STR_IS(kind, thinking) || STR_IS(kind, redacted_thinking))) {
            ctx->anthropic = 1;
        }
        result = add_dict_part(ctx, parts, block, &f);
    }
    release(&f);
    return result;
}

/* _user for a content that is not a list: its parts, then Ollama's images beside them. */
static int
user_simple(Ctx *ctx, PyObject *messages, Fields *m, PyObject *content)
{
    PyObject *parts = content_parts(ctx, content);
    int result;
    if (parts == NULL) {
        return -1;
    }
    result = images(ctx, FIELD(m, images), parts);
    if (result == 0) {
        result = append_new(messages, dict2(S(role), S(user), S(content), parts));
    }
    Py_DECREF(parts);
    return result;
}

/* _user for a list content: Anthropic tool_result blocks become `tool` messages, before
 * the user message of whatever else the content holds. */
static int
user_blocks(Ctx *ctx, PyObject *messages, PyObject *content)
{
    PyObject *parts = PyList_New(0), *block;
    int result = 0, results = 0;
    if (parts == NULL) {
        return -1;
    }
    for (Py_ssize_t i = 0; result == 0 && (block = list_item(content, i)) != NULL; i++) {
        result = user_block(ctx, messages, parts, block, &results);
        Py_DECREF(block);
    }
    /* Python: `if parts or not any(<block is a tool_result> for block in content)` */
    if (result == 0 && (PyList_Size(parts) > 0 || results == 0)) {
        result = append_new(messages, dict2(S(role), S(user), S(content), parts));
    }
    Py_DECREF(parts);
    return result;
}

/* _user, the message read into m. */
static int
user(Ctx *ctx, PyObject *messages, Fields *m)
{
    PyObject *content = FIELD(m, content);
    if (HAS(m, images)) {
        ctx->ollama = 1;
    }
    switch (jtype(content)) {
    case J_FOREIGN:
        return decline(ctx);
    case J_LIST:
        return user_blocks(ctx, messages, content);
    default:
        return user_simple(ctx, messages, m, content);
    }
}

/* ------------------------------------------------------------------------------------
 * _chat.chat_intent and _parts.assemble
 */

/* {"role": "unknown", "value": value}: junk where a message should be. */
static PyObject *
unknown_message(PyObject *value)
{
    return dict2(S(role), S(unknown), S(value), value);
}

/* {"role": role, "content": content_parts(content)} */
static PyObject *
plain_message(Ctx *ctx, PyObject *role, PyObject *content)
{
    PyObject *parts = content_parts(ctx, content), *message;
    if (parts == NULL) {
        return NULL;
    }
    message = dict2(S(role), role, S(content), parts);
    Py_DECREF(parts);
    return message;
}

/* One dict of body["messages"], read into m; *leading: only system messages so far. */
static int
chat_dict_message(Ctx *ctx, PyObject *messages, PyObject *system, PyObject *message,
                  Fields *m, int *leading)
{
    PyObject *role = FIELD(m, role);
    if (!PyUnicode_CheckExact(role)) {
        /* junk roles may be unhashable: None */
        *leading = 0;
        return append_new(messages, unknown_message(message));
    }
    if (STR_IS(role, system) || STR_IS(role, developer)) {
        if (*leading) { /* system/developer messages before any other are the prompt */
            return content_parts_into(ctx, system, FIELD(m, content));
        }
        return append_new(messages, plain_message(ctx, S(system), FIELD(m, content)));
    }
    *leading = 0;
    if (STR_IS(role, assistant)) {
        return append_new(messages, assistant(ctx, m));
    }
    if (STR_IS(role, tool)) {
        if (HAS(m, tool_name)) {
            ctx->ollama = 1;
        }
        return append_new(messages, tool_result(ctx, m));
    }
    if (STR_IS(role, function)) { /* legacy OpenAI function result */
        return append_new(messages, function_result(ctx, m));
    }
    if (STR_IS(role, user)) {
        return user(ctx, messages, m);
    }
    return append_new(messages, plain_message(ctx, role, FIELD(m, content)));
}

/* One element of body["messages"]. */
static int
chat_message(Ctx *ctx, PyObject *messages, PyObject *system, PyObject *message, int *leading)
{
    Fields m;
    int result;
    switch (jtype(message)) {
    case J_DICT:
        break;
    case J_FOREIGN:
        return decline(ctx);
    default:
        *leading = 0;
        return append_new(messages, unknown_message(message));
    }
    result = SCAN(ctx, message, MESSAGE_KEYS, &m);
    if (result == 0) {
        result = chat_dict_message(ctx, messages, system, message, &m, leading);
    }
    release(&m);
    return result;
}

/* assemble(messages, system, tools): "messages", then "system" and "tools" when any. */
static PyObject *
assemble(Ctx *ctx, PyObject *messages, PyObject *system, PyObject *tools)
{
    PyObject *intent = PyDict_New(), *declarations = NULL;
    if (intent == NULL || PyDict_SetItem(intent, S(messages), messages) < 0 ||
        (PyList_Size(system) > 0 && PyDict_SetItem(intent, S(system), system) < 0) ||
        (declarations = tool_declarations(ctx, tools)) == NULL ||
        (PyList_Size(declarations) > 0 && PyDict_SetItem(intent, S(tools), declarations) < 0)) {
        Py_CLEAR(intent);
    }
    Py_XDECREF(declarations);
    return intent;
}

/* chat_intent(body, walk): the intent dict, a new reference. */
static PyObject *
chat_intent(Ctx *ctx, PyObject *body)
{
    PyObject *top_system, *system, *body_messages, *messages, *message, *tools = NULL;
    PyObject *intent = NULL;
    int leading = 1;
    body_messages = item_of(body, S(messages));
    if (body_messages == NULL || !PyList_CheckExact(body_messages)) {
        if (!PyErr_Occurred()) {
            decline(ctx); /* not the list the caller promised: Python raises, or copes */
        }
        Py_XDECREF(body_messages);
        return NULL;
    }
    if ((top_system = get(body, S(system))) == NULL) { /* Anthropic's top-level system */
        Py_DECREF(body_messages);
        return NULL;
    }
    system = content_parts(ctx, top_system);
    Py_DECREF(top_system);
    messages = PyList_New(0);
    if (system == NULL || messages == NULL) {
        goto done;
    }
    for (Py_ssize_t i = 0; (message = list_item(body_messages, i)) != NULL; i++) {
        int result = chat_message(ctx, messages, system, message, &leading);
        Py_DECREF(message);
        if (result < 0) {
            goto done;
        }
    }
    /* body.get("tools", body.get("functions")) */
    if ((tools = item_of(body, S(tools))) == NULL &&
        (PyErr_Occurred() || (tools = get(body, S(functions))) == NULL)) {
        goto done;
    }
    intent = assemble(ctx, messages, system, tools);
done:
    Py_DECREF(body_messages);
    Py_XDECREF(system);
    Py_XDECREF(messages);
    Py_XDECREF(tools);
    return intent;
}

PyObject *
lf_chat_intent(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *intent, *result;
    Ctx ctx;
    if (nargs < 3 || nargs > 5) {
        PyErr_Format(PyExc_TypeError, "chat_intent expected 3 to 5 arguments, got %zd", nargs);
        return NULL;
    }
    if (init_strings() < 0) {
        return NULL;
    }
    if (!PyDict_CheckExact(args[0])) {
        Py_RETURN_NONE; /* a dict subclass may override get(): Python decides */
    }
    memset(&ctx, 0, sizeof ctx);
    ctx.parse_arguments = args[1];
    ctx.not_json = args[2];
    if (nargs >= 4 && args[3] != Py_None) {
        ctx.fast_max_length = nargs == 5 ? PyLong_AsSsize_t(args[4]) : 0;
        if (ctx.fast_max_length == -1 && PyErr_Occurred()) {
            return NULL;
        }
        ctx.fast_loads = args[3];
    }
    ctx.ok = 1;
    for (int k = 0; k < LF_N_STRINGS; k++) {
        ctx.known[k] = strings[k]; /* borrowed: not owned */
    }
    intent = chat_intent(&ctx, args[0]);
    ctx_free(&ctx);
    if (intent == NULL) {
        if (ctx.declined && !PyErr_Occurred()) {
            Py_RETURN_NONE;
        }
        return NULL;
    }
    if ((result = PyTuple_New(4)) == NULL) {
        Py_DECREF(intent);
        return NULL;
    }
    /* PyTuple_SetItem steals: the tuple owns the intent and the three flags. */
    PyTuple_SetItem(result, 0, intent);
    PyTuple_SetItem(result, 1, PyBool_FromLong(ctx.anthropic));
    PyTuple_SetItem(result, 2, PyBool_FromLong(ctx.ollama));
    PyTuple_SetItem(result, 3, PyBool_FromLong(ctx.ok));
    return result;
}
