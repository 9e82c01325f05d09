/* memkit.scan._tokens: the window tokens of memkit/scan/engine.py in one pass over the
 * bytes, instead of several hundred Hyperscan patterns (memkit/scan/tokens.py builds
 * the table and holds the rules).
 *
 * An event is (end, kind): a token of kind `kind` ends at byte offset `end`. Where
 * Hyperscan reports a match of a token's pattern ending at `end`, this pass reports an
 * event of that kind there too (a superset: it may report more):
 *  - a comment opener "<!--" and an ANSI code's "ESC [" (kinds given by the caller);
 *  - a backslash run of at least 65: one event at each offset 65 or more bytes after
 *    its first backslash, up to its end;
 *  - after a backslash run, "u" and four hex digits (any case): the code point's JSON
 *    kinds in the table;
 *  - "&#", zeros, then decimal digits: for each prefix of the digits, its value's
 *    decimal-entity kinds, ending after the prefix and, where a ';' follows it, after
 *    the ';' too; "&#x" or "&#X" the same in hex;
 *  - '%' and two hex digits: the byte's percent kinds;
 *  - a UTF-8 sequence (a lead byte 0xC2-0xF4 and the continuation bytes its lead asks
 *    for) that the table holds as a point.
 * The table: `keys`, sorted uint64 (tag << 32 | value; tags in tokens.py), `first`
 * (int32, one more than keys: the kinds of key i are kinds[first[i]:first[i+1]]),
 * `kinds` (int32), `pairs` (8192 bytes: a bit per lead byte and the byte after it that
 * some point starts with), `cps` (8192 bytes: a bit per value below 65536 that an
 * escape key holds). Candidates (the bytes that can start a token) are found 32 at a
 * time where the CPU has AVX2: each byte and the one after it are classed by their two
 * nibbles (`classes`, tokens.py), and a byte whose class the next byte can go on with
 * is read by at(); elsewhere 16 at a time (SSE2) or byte by byte, by the bytes alone.
 *
 * tests/test_scan_tokens.py holds the events to Hyperscan's matches of the patterns.
 * C99 against the stable parts of the CPython API.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_scan.h"

#define TOKENS_ABI 1

static int use_avx2 = 0; /* the CPU runs AVX2 (set at import; tests may turn it off) */ /* memkit/scan/tokens.py checks it: a stale build is reported */

enum { TAG_POINT = 1, TAG_JSON = 2, TAG_DEC = 3, TAG_HEX = 4, TAG_PCT = 5 };

typedef struct {
    const uint64_t *keys;
    const int32_t *first, *kinds;
    Py_ssize_t n;
    const unsigned char *pairs, *cps; /* cps: a bit per value below 65536 some escape key holds */
    int k_comment, k_ansi, k_run; /* -1: not asked for */
    int points;                   /* the table holds points: lead bytes are candidates */
} table;

/* A byte's hex value, or 0x10 for a byte that is no hex digit. */
static const unsigned char hex_of[256] = {
#define X16 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10
    X16, X16, X16,
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10,
    0x10, 10, 11, 12, 13, 14, 15, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, X16,
    0x10, 10, 11, 12, 13, 14, 15, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x10, X16,
    X16, X16, X16, X16, X16, X16, X16, X16,
#undef X16
};


/* Append the events of key (tag, value) ending at end; -1 when memory runs out. */
static int emit(const table *t, int tag, uint64_t value, Py_ssize_t end, vec *out) {
    if (tag != TAG_POINT && value < 65536 && !(t->cps[value >> 3] & (1u << (value & 7)))) return 0;
    uint64_t key = ((uint64_t)tag << 32) | value;
    Py_ssize_t lo = 0, hi = t->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) >> 1;
        if (t->keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == t->n || t->keys[lo] != key) return 0;
    for (int32_t k = t->first[lo]; k < t->first[lo + 1]; k++)
        if (push(out, end) < 0 || push(out, t->kinds[k]) < 0) return -1;
    return 0;
}

static inline int push2(vec *out, Py_ssize_t end, int kind) {
    return push(out, end) < 0 || push(out, kind) < 0 ? -1 : 0;
}

static inline int candidate(const unsigned char *a, Py_ssize_t p, Py_ssize_t len, int points) {
    unsigned char b = a[p];
    if (b == '\\' || b == '&' || b == '%' || b == '<' || b == 0x1B) return 1;
    return points && b >= 0xC2 && b <= 0xF4 && p + 1 < len && (a[p + 1] & 0xC0) == 0x80;
}

/* The first candidate in a[p:len], or len. */
static inline Py_ssize_t next_candidate(const unsigned char *a, Py_ssize_t p, Py_ssize_t len, int points) {
#if HAVE_SSE2
    const __m128i bs = _mm_set1_epi8('\\'), amp = _mm_set1_epi8('&'), pct = _mm_set1_epi8('%'),
                  lt = _mm_set1_epi8('<'), esc = _mm_set1_epi8(0x1B);
    for (; p + 17 <= len; p += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(a + p));
        __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, bs), _mm_cmpeq_epi8(x, amp)),
                                 _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, pct), _mm_cmpeq_epi8(x, lt)),
                                              _mm_cmpeq_epi8(x, esc)));
        if (points) {
            __m128i y = _mm_loadu_si128((const __m128i *)(a + p + 1));
            m = _mm_or_si128(m, _mm_and_si128(in_range(x, 0xC2, 0xF4 - 0xC2), in_range(y, 0x80, 0x3F)));
        }
        unsigned mask = (unsigned)_mm_movemask_epi8(m);
        if (mask) return p + __builtin_ctz(mask);
    }
#endif
    for (; p < len; p++)
        if (candidate(a, p, len, points)) return p;
    return len;
}

/* The events of the token(s) starting at a[q] (a candidate); *next: where the search
 * for the next candidate goes on. */
static int at(const unsigned char *a, Py_ssize_t q, Py_ssize_t len, const table *t, vec *out, Py_ssize_t *next) {
    unsigned char b = a[q];
    *next = q + 1;
    if (b == '\\') {
        Py_ssize_t r = q;
        while (r < len && a[r] == '\\') r++;
        if (t->k_run >= 0)
            for (Py_ssize_t e = q + 65; e <= r; e++)
                if (push2(out, e, t->k_run) < 0) return -1;
        *next = r;
        if (r + 5 <= len && a[r] == 'u') {
            uint64_t cp = 0;
            int h = 0;
            for (; h < 4; h++) {
                int v = hex_value(a[r + 1 + h]);
                if (v < 0) break;
                cp = cp << 4 | (uint64_t)v;
            }
            if (h == 4 && emit(t, TAG_JSON, cp, r + 5, out) < 0) return -1;
        }
        return 0;
    }
    if (b == '&') {
        if (q + 2 >= len || a[q + 1] != '#') return 0;
        Py_ssize_t p = q + 2;
        int tag = TAG_DEC, base = 10, most = 7;
        if (a[p] == 'x' || a[p] == 'X') {
            tag = TAG_HEX, base = 16, most = 6;
            p++;
        }
        while (p < len && a[p] == '0') p++;
        uint64_t v = 0;
        for (int d = 0; d < most && p < len; d++, p++) {
            int x = base == 10 ? ((unsigned)(a[p] - '0') < 10 ? a[p] - '0' : -1) : hex_value(a[p]);
            if (x < 0) break;
            v = v * (uint64_t)base + (uint64_t)x;
            if (emit(t, tag, v, p + 1, out) < 0) return -1;
            if (p + 1 < len && a[p + 1] == ';' && emit(t, tag, v, p + 2, out) < 0) return -1;
        }
        return 0;
    }
    if (b == '%') {
        if (q + 3 <= len) {
            int h1 = hex_value(a[q + 1]), h2 = h1 < 0 ? -1 : hex_value(a[q + 2]);
            if (h2 >= 0 && emit(t, TAG_PCT, (uint64_t)(h1 << 4 | h2), q + 3, out) < 0) return -1;
        }
        return 0;
    }
    if (b == '<') {
        if (t->k_comment >= 0 && q + 4 <= len && a[q + 1] == '!' && a[q + 2] == '-' && a[q + 3] == '-')
            return push2(out, q + 4, t->k_comment);
        return 0;
    }
    if (b == 0x1B) {
        if (t->k_ansi >= 0 && q + 2 <= len && a[q + 1] == '[') return push2(out, q + 2, t->k_ansi);
        return 0;
    }
    /* a lead byte with a continuation byte after it */
    if (!(t->pairs[(size_t)b << 5 | a[q + 1] >> 3] & (1u << (a[q + 1] & 7)))) return 0;
    int n = b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
    if (q + n > len) return 0;
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)a[q + i] << (8 * i);
    return emit(t, TAG_POINT, v, q + n, out);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define HAVE_AVX2_TARGET 1

/* scan() 32 bytes at a time: a candidate is a byte of a class that can start a token
 * followed by a byte that can go on with one of that class (a superset: at() decides),
 * each tested by its two nibbles (`cls`: 64 bytes, the tables of the first byte's low
 * and high nibble, then the next byte's; a bit per class, memkit/scan/tokens.py). */
__attribute__((target("avx2"))) static int scan_avx2(const unsigned char *a, Py_ssize_t len, const table *t,
                                                      const unsigned char *cls, vec *out) {
    const __m256i nib = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
    const __m256i xlo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)cls));
    const __m256i xhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(cls + 16)));
    const __m256i ylo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(cls + 32)));
    const __m256i yhi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(cls + 48)));
    Py_ssize_t p = 0, next = 0;
    for (; p + 33 <= len; p += 32) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(a + p));
        __m256i cx = _mm256_and_si256(_mm256_shuffle_epi8(xlo, _mm256_and_si256(x, nib)),
                                      _mm256_shuffle_epi8(xhi, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib)));
        __m256i y = _mm256_loadu_si256((const __m256i *)(a + p + 1));
        __m256i cy = _mm256_and_si256(_mm256_shuffle_epi8(ylo, _mm256_and_si256(y, nib)),
                                      _mm256_shuffle_epi8(yhi, _mm256_and_si256(_mm256_srli_epi16(y, 4), nib)));
        uint32_t mask = ~(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_and_si256(cx, cy), zero));
        while (mask) {
            Py_ssize_t q = p + __builtin_ctz(mask);
            mask &= mask - 1;
            if (q < next) continue;
            unsigned char b = a[q], c = a[q + 1];
            if (b == '\\' && c == 'u' && q + 6 <= len) { /* the common case, as at() reads it, with fewer branches */
                unsigned cp = (unsigned)hex_of[a[q + 2]] << 12 | (unsigned)hex_of[a[q + 3]] << 8 |
                              (unsigned)hex_of[a[q + 4]] << 4 | (unsigned)hex_of[a[q + 5]];
                unsigned bad = (unsigned)(hex_of[a[q + 2]] | hex_of[a[q + 3]] | hex_of[a[q + 4]] | hex_of[a[q + 5]]) & 0x10;
                next = q + 1;
                if (!bad && (t->cps[cp >> 3] >> (cp & 7) & 1) && emit(t, TAG_JSON, cp, q + 6, out) < 0) return -1;
                continue;
            }
            if (b >= 0xC2 && !(t->pairs[(size_t)b << 5 | c >> 3] >> (c & 7) & 1)) continue; /* no point starts so */
            if (at(a, q, len, t, out, &next) < 0) return -1;
        }
    }
    for (p = next > p ? next : p; p < len; p++) {
        if (!candidate(a, p, len, t->points)) continue;
        if (at(a, p, len, t, out, &next) < 0) return -1;
        p = next - 1;
    }
    return 0;
}
#else
#define HAVE_AVX2_TARGET 0
#endif

static int scan(const unsigned char *a, Py_ssize_t len, const table *t, vec *out) {
    for (Py_ssize_t q = next_candidate(a, 0, len, t->points); q < len; q = next_candidate(a, q, len, t->points)) {
        Py_ssize_t next;
        if (at(a, q, len, t, out, &next) < 0) return -1;
        q = next;
    }
    return 0;
}

PyDoc_STRVAR(events_doc,
"events(data, keys, first, kinds, pairs, cps, classes, k_comment, k_ansi, k_run) -> bytes\n\n"
"The window-token events of data (bytes-like), as int64 pairs (end, kind) in order of\n"
"end (module comment; memkit/scan/tokens.py builds the table; k_*: the kinds of the\n"
"comment opener, the ANSI code and the long backslash run, -1 for none).");

static PyObject *events(PyObject *self, PyObject *args) {
    Py_buffer data, keys, first, kinds, pairs, cps, classes;
    int k_comment, k_ansi, k_run;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*y*y*y*iii", &data, &keys, &first, &kinds, &pairs, &cps, &classes, &k_comment,
                          &k_ansi, &k_run))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = keys.len / (Py_ssize_t)sizeof(uint64_t);
    if (keys.len % 8 || first.len != (n + 1) * 4 || kinds.len % 4 || pairs.len != 8192 || cps.len != 8192 ||
        classes.len != 64) {
        PyErr_SetString(PyExc_ValueError, "events: keys, first, kinds, pairs, cps or classes of the wrong size");
    } else {
        const int32_t *f = (const int32_t *)first.buf;
        int ok = 1;
        for (Py_ssize_t i = 0; i <= n && ok; i++) ok = f[i] >= 0 && f[i] <= kinds.len / 4 && (i == 0 || f[i] >= f[i - 1]);
        if (!ok) {
            PyErr_SetString(PyExc_ValueError, "events: first is not a range of kinds");
        } else {
            int points = 0;
            for (Py_ssize_t i = 0; i < n && !points; i++) points = (((const uint64_t *)keys.buf)[i] >> 32) == TAG_POINT;
            table t = {(const uint64_t *)keys.buf, f, (const int32_t *)kinds.buf, n,
                       (const unsigned char *)pairs.buf, (const unsigned char *)cps.buf, k_comment, k_ansi, k_run, points};
            const unsigned char *cls = (const unsigned char *)classes.buf;
            vec out = {NULL, 0, 0};
            int rc;
            Py_BEGIN_ALLOW_THREADS
#if HAVE_AVX2_TARGET
            if (use_avx2)
                rc = scan_avx2((const unsigned char *)data.buf, data.len, &t, cls, &out);
            else
#endif
                rc = scan((const unsigned char *)data.buf, data.len, &t, &out);
            Py_END_ALLOW_THREADS
            (void)cls;
            result = vec_bytes(&out, rc);
        }
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&keys);
    PyBuffer_Release(&first);
    PyBuffer_Release(&kinds);
    PyBuffer_Release(&pairs);
    PyBuffer_Release(&cps);
    PyBuffer_Release(&classes);
    return result;
}

static PyObject *set_avx2(PyObject *self, PyObject *arg) {
    (void)self;
    int on = PyObject_IsTrue(arg);
    if (on < 0) return NULL;
#if HAVE_AVX2_TARGET
    use_avx2 = on && __builtin_cpu_supports("avx2");
#else
    use_avx2 = 0;
#endif
    return PyBool_FromLong(use_avx2);
}

static PyMethodDef methods[] = {
    {"events", events, METH_VARARGS, events_doc},
    {"set_avx2", set_avx2, METH_O, "set_avx2(on) -> bool: use the AVX2 pass where the CPU has it (the default); returns whether it is used."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memkit.scan._tokens",
    "The window tokens of the scan engine in one pass (see memkit/scan/tokens.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__tokens(void) {
#if HAVE_AVX2_TARGET
    use_avx2 = __builtin_cpu_supports("avx2");
#endif
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI", TOKENS_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
