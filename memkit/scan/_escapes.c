/* memkit.scan._escapes: the texts whose JSON decoding memkit/scan/json_escapes.py cannot
 * prove adds nothing, in one pass over texts joined by NUL bytes.
 *
 * A text (a stretch between NULs) is unproven when it holds any of (json_escapes.py,
 * conditions 2 to 4):
 *  - a number with a fraction or an exponent: a run of digits after a byte that is no
 *    ASCII letter or digit (or at the text's start), or after an escaped whitespace
 *    (\n, \t, \r), followed by '.' and a digit, or by 'e'/'E', an optional sign and a
 *    digit;
 *  - "NaN" or "Infinity";
 *  - an escaped backslash ("\\");
 *  - a backslash inside a tag: after a '<', before any '<' or '>';
 *  - a comment opener ("<!--") and a backslash anywhere in the same text;
 *  - where the caller asks (`ascii`), a byte above 0x7F: the proof needs an ASCII text;
 *  - a \uXXXX escape the caller's tables judge: `judged3` (4096 bytes, by the value of
 *    the escape's first three hex digits) names the escapes read one by one, which are
 *    unproven unless a fourth hex digit follows and `harmless4` (65536 bytes, by code
 *    point) says so; `fold4` names the code points whose escape is unproven however
 *    its 'u' and hex digits are cased (characters that fold to several).
 * Each backslash is read on its own, whatever precedes it (an escaped backslash already
 * leaves its text unproven).
 *
 * Only the bytes that can start one of these ('\\', '<', 'N', 'I', a digit after no
 * letter or digit) are looked at, found 16 bytes at a time (SSE2; byte by byte
 * elsewhere); texts end at memchr's NUL.
 * tests/test_scan_json_escapes.py holds the result to these rules written as regular
 * expressions, run by Hyperscan, on generated texts.
 *
 * C99 against the stable parts of the CPython API.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_scan.h"

#define ESCAPES_ABI 3 /* memkit/scan/json_escapes.py checks it: a stale build is reported */

typedef struct {
    const unsigned char *judged3, *harmless4, *fold4;
    int ascii; /* a byte above 0x7F leaves its text unproven too */
} tables;

static inline int is_digit(unsigned char b) { return (unsigned)(b - '0') < 10; }
static inline int is_alnum(unsigned char b) { return is_digit(b) || (unsigned)((b | 0x20) - 'a') < 26; }

/* Whether the digits from p (at least one) go on to a fraction or an exponent. */
static int number_at(const unsigned char *a, Py_ssize_t p, Py_ssize_t e) {
    if (p >= e || !is_digit(a[p])) return 0;
    while (p < e && is_digit(a[p])) p++;
    if (p + 1 < e && a[p] == '.' && is_digit(a[p + 1])) return 1;
    if (p < e && (a[p] | 0x20) == 'e') {
        p++;
        if (p < e && (a[p] == '+' || a[p] == '-')) p++;
        return p < e && is_digit(a[p]);
    }
    return 0;
}

/* Whether the escape at p (a backslash, in a text ending at e) leaves its text unproven. */
static int backslash_at(const unsigned char *a, Py_ssize_t p, Py_ssize_t e, const tables *t) {
    if (p + 1 >= e) return 0;
    unsigned char n = a[p + 1];
    if (n == '\\') return 1;
    if (n == 'n' || n == 't' || n == 'r') return number_at(a, p + 2, e);
    if (n != 'u' && n != 'U') return 0;
    int h = 0;
    unsigned cp = 0;
    while (h < 4 && p + 2 + h < e) {
        int d = hex_value(a[p + 2 + h]);
        if (d < 0) break;
        cp = cp << 4 | (unsigned)d;
        h++;
    }
    if (h == 4 && t->fold4[cp]) return 1;
    if (n == 'u' && h >= 3) {
        unsigned v3 = h == 4 ? cp >> 4 : cp;
        if (t->judged3[v3] && !(h == 4 && t->harmless4[cp])) return 1;
    }
    return 0;
}

/* Whether the tag opened by the '<' at p holds a backslash before its '<' or '>'. */
static int tag_escape(const unsigned char *a, Py_ssize_t p, Py_ssize_t e) {
    for (Py_ssize_t q = p + 1; q < e; q++) {
        unsigned char b = a[q];
        if (b == '\\') return 1;
        if (b == '<' || b == '>') return 0;
    }
    return 0;
}

/* Whether a[p] can start a rule in a text starting at s: '\\', '<', 'N', 'I', or a
 * digit with no letter or digit before it (one after a letter starts nothing: a number
 * after an escaped whitespace is read from its backslash). */
static inline int starts_rule(const unsigned char *a, Py_ssize_t p, Py_ssize_t s, int ascii) {
    unsigned char b = a[p];
    return b == '\\' || b == '<' || b == 'N' || b == 'I' || (is_digit(b) && (p == s || !is_alnum(a[p - 1]))) ||
           (ascii && b >= 0x80);
}

/* Bit i: starts_rule(a, p + i, s) for the 16 bytes from p (p > s, or a byte before p
 * that is no letter or digit). */
static inline unsigned interesting16(const unsigned char *a, Py_ssize_t p, int ascii) {
#if HAVE_SSE2
    __m128i x = _mm_loadu_si128((const __m128i *)(a + p)), y = _mm_loadu_si128((const __m128i *)(a + p - 1));
    __m128i m = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('\\')), _mm_cmpeq_epi8(x, _mm_set1_epi8('<'))),
                             _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('N')), _mm_cmpeq_epi8(x, _mm_set1_epi8('I'))));
    __m128i before = _mm_or_si128(in_range(y, '0', 9), in_range(_mm_or_si128(y, _mm_set1_epi8(0x20)), 'a', 25));
    m = _mm_or_si128(m, _mm_andnot_si128(before, in_range(x, '0', 9)));
    return (unsigned)_mm_movemask_epi8(m) | (ascii ? (unsigned)_mm_movemask_epi8(x) : 0u);
#else
    unsigned r = 0;
    for (int i = 0; i < 16; i++) r |= (unsigned)starts_rule(a, p + i, p - 1, ascii) << i;
    return r;
#endif
}


/* The first byte of a[p:e] that can start a rule in a text starting at s, or e. */
static inline Py_ssize_t next_start(const unsigned char *a, Py_ssize_t p, Py_ssize_t s, Py_ssize_t e, int ascii) {
    if (p == s && p < e) { /* the text's first byte: nothing before it is read */
        if (starts_rule(a, p, s, ascii)) return p;
        p++;
    }
    for (; p + 16 <= e; p += 16) {
        unsigned mask = interesting16(a, p, ascii);
        if (mask) return p + __builtin_ctz(mask);
    }
    for (; p < e; p++)
        if (starts_rule(a, p, s, ascii)) return p;
    return e;
}

/* Whether the text a[s:e] (no NUL in it) is unproven; *at: an offset inside it that
 * shows it (the byte after the one that did). */
static int text_unproven(const unsigned char *a, Py_ssize_t s, Py_ssize_t e, const tables *t, Py_ssize_t *at) {
    int bs = 0, cm = 0; /* it holds a backslash, a comment opener */
    for (Py_ssize_t q = next_start(a, s, s, e, t->ascii); q < e; q = next_start(a, q + 1, s, e, t->ascii)) {
        unsigned char b = a[q];
        int hit = 0;
        if (b >= 0x80) {
            hit = 1; /* only asked for with t->ascii */
        } else if (b == '\\') {
            bs = 1;
            hit = cm || backslash_at(a, q, e, t);
            if (!hit && q + 1 < e && (a[q + 1] | 0x20) == 'u') { /* its hex digits start nothing (a letter before each) */
                q++;
                for (int h = 0; h < 4 && q + 1 < e && hex_value(a[q + 1]) >= 0; h++) q++;
            }
        } else if (b == '<') {
            if (q + 4 <= e && a[q + 1] == '!' && a[q + 2] == '-' && a[q + 3] == '-') {
                cm = 1;
                hit = bs;
            }
            hit = hit || tag_escape(a, q, e);
        } else if (b == 'N') {
            hit = q + 3 <= e && a[q + 1] == 'a' && a[q + 2] == 'N';
        } else if (b == 'I') {
            hit = q + 8 <= e && memcmp(a + q, "Infinity", 8) == 0;
        } else { /* a digit with no letter or digit before it: a number starts here */
            hit = number_at(a, q, e);
        }
        if (hit) {
            *at = q + 1;
            return 1;
        }
    }
    return 0;
}

/* Every text of a[0:len] (split at NULs) that is unproven: one offset inside each. */
static int scan(const unsigned char *a, Py_ssize_t len, const tables *t, vec *out) {
    for (Py_ssize_t s = 0;;) {
        const unsigned char *z = (const unsigned char *)memchr(a + s, 0, (size_t)(len - s));
        Py_ssize_t e = z ? z - a : len, at;
        if (text_unproven(a, s, e, t, &at) && push(out, at) < 0) return -1;
        if (!z) return 0;
        s = e + 1;
    }
}

PyDoc_STRVAR(unproven_doc,
"unproven(data, judged3, harmless4, fold4, ascii=False) -> bytes\n\n"
"The texts of data (bytes-like, texts joined by NUL bytes) whose JSON decoding cannot be\n"
"proven to add nothing (module comment): int64 offsets, one inside each such text (the\n"
"byte after the one that showed it), in order. judged3: 4096 bytes, nonzero for the\n"
"first three hex digits of a \\u escape that is judged one by one; harmless4: 65536\n"
"bytes, nonzero for a code point whose \\u escape is harmless; fold4: 65536 bytes, nonzero\n"
"for a code point whose escape is unproven however it is cased; ascii: a text holding a\n"
"byte above 0x7F is unproven too (the proof's condition 1).");

static PyObject *unproven(PyObject *self, PyObject *args) {
    Py_buffer data, j3, h4, f4;
    int ascii = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*|p", &data, &j3, &h4, &f4, &ascii)) return NULL;
    PyObject *result = NULL;
    if (j3.len != 4096 || h4.len != 65536 || f4.len != 65536) {
        PyErr_SetString(PyExc_ValueError, "unproven: judged3 must be 4096 bytes, harmless4 and fold4 65536");
    } else {
        tables t = {(const unsigned char *)j3.buf, (const unsigned char *)h4.buf, (const unsigned char *)f4.buf, ascii};
        vec out = {NULL, 0, 0};
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = scan((const unsigned char *)data.buf, data.len, &t, &out);
        Py_END_ALLOW_THREADS
        result = vec_bytes(&out, rc);
    }
    PyBuffer_Release(&data);
    PyBuffer_Release(&j3);
    PyBuffer_Release(&h4);
    PyBuffer_Release(&f4);
    return result;
}

/* The NULs of a[0:len] (pushed to out), and whether it holds a breaker other than NUL
 * (a control byte but whitespace and ESC, or DEL: bit 1) or a byte above 0x7F (bit 2). */
static int texts_of(const unsigned char *a, Py_ssize_t len, vec *out, int *flags) {
    Py_ssize_t p = 0;
    unsigned hi = 0, ctl = 0;
#if HAVE_SSE2
    __m128i acc_hi = _mm_setzero_si128(), acc_ctl = _mm_setzero_si128();
    const __m128i zero = _mm_setzero_si128(), esc = _mm_set1_epi8(0x1B), del = _mm_set1_epi8(0x7F);
    for (; p + 16 <= len; p += 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(a + p));
        unsigned z = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, zero));
        while (z) {
            if (push(out, p + __builtin_ctz(z)) < 0) return -1;
            z &= z - 1;
        }
        acc_hi = _mm_or_si128(acc_hi, x);
        /* below 0x20, no NUL, no whitespace (0x09-0x0D), no ESC; or DEL */
        __m128i c = _mm_andnot_si128(_mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, zero), _mm_cmpeq_epi8(x, esc)),
                                                  in_range(x, 0x09, 4)),
                                     in_range(x, 0x00, 0x1F));
        acc_ctl = _mm_or_si128(acc_ctl, _mm_or_si128(c, _mm_cmpeq_epi8(x, del)));
    }
    hi = (unsigned)_mm_movemask_epi8(acc_hi);
    ctl = (unsigned)_mm_movemask_epi8(acc_ctl);
#endif
    for (; p < len; p++) {
        unsigned char b = a[p];
        if (!b && push(out, p) < 0) return -1;
        hi |= b >= 0x80;
        ctl |= (b && b < 0x20 && !(b >= 0x09 && b <= 0x0D) && b != 0x1B) || b == 0x7F;
    }
    *flags = (ctl ? 1 : 0) | (hi ? 2 : 0);
    return 0;
}

PyDoc_STRVAR(texts_doc,
"texts(data) -> (bytes, int)\n\n"
"Where the texts of data (bytes-like, texts joined by NUL bytes) are joined: the int64\n"
"offsets of its NUL bytes, in order; and flags: 1 where it holds a control byte other\n"
"than NUL, whitespace and ESC, or DEL (a breaker memkit.scan.multi.text_bytes rewrites),\n"
"2 where it holds a byte above 0x7F. One pass.");

static PyObject *texts(PyObject *self, PyObject *args) {
    Py_buffer data;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &data)) return NULL;
    vec out = {NULL, 0, 0};
    int rc, flags = 0;
    Py_BEGIN_ALLOW_THREADS
    rc = texts_of((const unsigned char *)data.buf, data.len, &out, &flags);
    Py_END_ALLOW_THREADS
    PyObject *result = NULL;
    if (rc < 0)
        PyErr_NoMemory();
    else
        result = Py_BuildValue("(y#i)", out.v ? (const char *)out.v : "", out.n * (Py_ssize_t)sizeof(int64_t), flags);
    PyMem_RawFree(out.v);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"unproven", unproven, METH_VARARGS, unproven_doc},
    {"texts", texts, METH_VARARGS, texts_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memkit.scan._escapes",
    "The texts whose JSON decoding may add a copy (see memkit/scan/json_escapes.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__escapes(void) {
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI", ESCAPES_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
