/* memkit.scan._letters: the plain letters of a buffer, for the multi-secret scan engine.
 *
 * One left-to-right pass over bytes that yields what memkit/scan/plain.py needs to
 * find plain candidates (see its module doc): the letters and digits outside every
 * encoded construct, lower-cased; each top-level construct with its rank among those
 * letters; the constructs nested in tags; and block checkpoints that map a letter's
 * index back to its byte offset.
 *
 * A construct is parsed exactly as memkit/scan/matching.py's separator run parses it from
 * its first byte (the greedy first-alternative parse of the atomic run):
 *   - a run of at most 64 backslashes (its first byte not after a backslash) then
 *     u + 4 hex, U + 8 hex, x + 2 hex, or one of ntrbfv0;
 *   - % + 2 hex;
 *   - an entity: & + letter + up to 31 more letters/digits + ';', one of the listed
 *     names without ';', &# + 1-7 digits [;], &#x + 1-6 hex [;];
 *   - a tag: '<' ['/'] letter, a body of at most 500 characters (UTF-8 sequences, any
 *     other byte alone, read greedily) without '<', '>' or control bytes (tab, line
 *     breaks and ESC allowed), '>'.
 * Only tags hold other constructs. tests/test_scan_engine.py checks the engine built on
 * this pass against each secret's own byte pattern.
 *
 * C99 against the stable parts of the CPython API; on x86-64 CPUs with SSSE3 (all
 * since 2006), stretches of 16 bytes without a byte that may start a construct are
 * lower-cased and packed 16 at a time (fast_letters); elsewhere, and for the bytes
 * that may, byte by byte. No -march: the SIMD function is compiled for its target and
 * chosen at import.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_FAST 1
#else
#define HAVE_FAST 0
#endif

#define LETTERS_ABI 2 /* memkit/scan/plain.py checks it: a stale build is reported */

static unsigned char ALNUM[256], LETTER[256], DIGIT[256], HEX[256], TAGBODY[256], LOWER[256];
static unsigned char CLS[256]; /* 0 other, 1 letter or digit, 2 may start a construct */

static const char *NAMES[] = {"nbsp", "amp", "lt", "gt", "quot", "apos", "shy",
                              "ndash", "mdash", "thinsp", "ensp", "emsp"};
#define N_NAMES (sizeof(NAMES) / sizeof(NAMES[0]))

static void init_tables(void) {
    for (int c = 0; c < 256; c++) {
        int letter = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z');
        int digit = c >= '0' && c <= '9';
        LETTER[c] = (unsigned char)letter;
        DIGIT[c] = (unsigned char)digit;
        ALNUM[c] = (unsigned char)(letter || digit);
        HEX[c] = (unsigned char)(digit || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'));
        LOWER[c] = (unsigned char)((c >= 'A' && c <= 'Z') ? c + 32 : c);
        int stop = c == '<' || c == '>' || c <= 0x08 || (c >= 0x0E && c <= 0x1A) ||
                   (c >= 0x1C && c <= 0x1F) || c == 0x7F;
        TAGBODY[c] = (unsigned char)!stop;
        CLS[c] = (unsigned char)(ALNUM[c] ? 1 : (c == '\\' || c == '%' || c == '&' || c == '<') ? 2 : 0);
    }
}

typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} vec;

static int push(vec *x, int64_t a) {
    if (x->n == x->cap) {
        Py_ssize_t cap = x->cap ? x->cap * 2 : 256;
        int64_t *v = (int64_t *)PyMem_Realloc(x->v, (size_t)cap * sizeof(int64_t));
        if (!v) {
            PyErr_NoMemory();
            return -1;
        }
        x->v = v;
        x->cap = cap;
    }
    x->v[x->n++] = a;
    return 0;
}

static PyObject *vec_bytes(vec *x) {
    PyObject *b = PyBytes_FromStringAndSize((const char *)x->v, x->n * (Py_ssize_t)sizeof(int64_t));
    PyMem_Free(x->v);
    x->v = NULL;
    return b;
}

#if HAVE_FAST
static int fast_ok; /* the CPU has SSSE3 and POPCNT (set at import) */
static unsigned char PACK[256][8]; /* pshufb indices that pack the lanes of an 8-bit mask to the front */

static void init_pack(void) {
    for (int m = 0; m < 256; m++) {
        int j = 0;
        for (int i = 0; i < 8; i++)
            if (m >> i & 1) PACK[m][j++] = (unsigned char)i;
        while (j < 8) PACK[m][j++] = 0x80;
    }
}

/* The plain letters of a[p..bend) 16 bytes at a time (letters and digits lower-cased
 * and packed into out at *k, every other byte dropped), as long as a block holds no
 * byte that may start a construct ('\\', '%', '&', '<'); returns where it stopped and
 * sets *stop to the first such byte of the block it stopped at (or bend). */
__attribute__((target("ssse3,popcnt"))) static Py_ssize_t fast_letters(const unsigned char *a, Py_ssize_t p,
                                                                       Py_ssize_t bend, unsigned char *out,
                                                                       Py_ssize_t *k, Py_ssize_t *stop) {
    const __m128i d0 = _mm_set1_epi8('0'), d9 = _mm_set1_epi8(9), ua = _mm_set1_epi8('A'), la = _mm_set1_epi8('a');
    const __m128i z25 = _mm_set1_epi8(25), bit = _mm_set1_epi8(0x20);
    const __m128i bs = _mm_set1_epi8('\\'), pc = _mm_set1_epi8('%'), am = _mm_set1_epi8('&'), lt = _mm_set1_epi8('<');
    Py_ssize_t kk = *k;
    *stop = bend;
    while (p + 16 <= bend) {
        __m128i x = _mm_loadu_si128((const __m128i *)(a + p));
        __m128i sp = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, bs), _mm_cmpeq_epi8(x, pc)),
                                  _mm_or_si128(_mm_cmpeq_epi8(x, am), _mm_cmpeq_epi8(x, lt)));
        int special = _mm_movemask_epi8(sp);
        if (special) {
            *stop = p + __builtin_ctz((unsigned)special);
            break;
        }
        __m128i t = _mm_sub_epi8(x, d0);
        __m128i digit = _mm_cmpeq_epi8(_mm_min_epu8(t, d9), t);
        t = _mm_sub_epi8(x, ua);
        __m128i upper = _mm_cmpeq_epi8(_mm_min_epu8(t, z25), t);
        t = _mm_sub_epi8(x, la);
        __m128i lower = _mm_cmpeq_epi8(_mm_min_epu8(t, z25), t);
        __m128i keep = _mm_or_si128(digit, _mm_or_si128(upper, lower));
        __m128i folded = _mm_add_epi8(x, _mm_and_si128(upper, bit));
        unsigned mask = (unsigned)_mm_movemask_epi8(keep);
        unsigned m0 = mask & 0xFF, m1 = mask >> 8;
        __m128i v0 = _mm_shuffle_epi8(folded, _mm_loadl_epi64((const __m128i *)PACK[m0]));
        _mm_storel_epi64((__m128i *)(out + kk), v0);
        kk += __builtin_popcount(m0);
        __m128i v1 = _mm_shuffle_epi8(_mm_srli_si128(folded, 8), _mm_loadl_epi64((const __m128i *)PACK[m1]));
        _mm_storel_epi64((__m128i *)(out + kk), v1);
        kk += __builtin_popcount(m1);
        p += 16;
    }
    *k = kk;
    return p;
}
#endif

#define AT(p) ((p) < n ? a[(p)] : 0)

static Py_ssize_t count(const unsigned char *a, Py_ssize_t n, Py_ssize_t p, const unsigned char *t,
                        Py_ssize_t most) {
    Py_ssize_t k = 0;
    while (k < most && p + k < n && t[a[p + k]]) k++;
    return k;
}

#define CONT(q) ((q) < n && (a[(q)] & 0xC0) == 0x80)

/* The bytes of a tag's body from a[p]: at most 500 characters, each a UTF-8 sequence
 * (lead byte and its continuation bytes) or any other byte alone, taken greedily, none
 * an ASCII byte TAGBODY excludes (the possessive body of SEP_PATTERNS_BYTES' tag). */
static Py_ssize_t tag_body(const unsigned char *a, Py_ssize_t n, Py_ssize_t p) {
    Py_ssize_t q = p;
    for (int k = 0; k < 500 && q < n; k++) {
        unsigned char b = a[q];
        if (b < 0x80) {
            if (!TAGBODY[b])
                break;
            q += 1;
        } else if (b >= 0xC2 && b <= 0xDF && CONT(q + 1))
            q += 2;
        else if (b >= 0xE0 && b <= 0xEF && CONT(q + 1) && CONT(q + 2))
            q += 3;
        else if (b >= 0xF0 && b <= 0xF4 && CONT(q + 1) && CONT(q + 2) && CONT(q + 3))
            q += 4;
        else
            q += 1;
    }
    return q - p;
}

/* The construct that starts at a[p] (a[p] is '\\', '%', '&' or '<'): its end, or 0.
 * *tag: whether it is a tag. *next: where a caller resumes when there is none
 * (past a backslash run, whose inner bytes start nothing). */
static Py_ssize_t construct_at(const unsigned char *a, Py_ssize_t n, Py_ssize_t p, int *tag,
                               Py_ssize_t *next) {
    unsigned char c = a[p];
    *tag = 0;
    *next = p + 1;
    if (c == '\\') {
        Py_ssize_t t = p;
        while (t < n && a[t] == '\\') t++;
        *next = t;
        if ((p > 0 && a[p - 1] == '\\') || t - p > 64) return 0;
        unsigned char e = AT(t);
        if (e == 'n' || e == 't' || e == 'r' || e == 'b' || e == 'f' || e == 'v' || e == '0') return t + 1;
        if (e == 'u') return count(a, n, t + 1, HEX, 4) == 4 ? t + 5 : 0;
        if (e == 'U') return count(a, n, t + 1, HEX, 8) == 8 ? t + 9 : 0;
        if (e == 'x') return count(a, n, t + 1, HEX, 2) == 2 ? t + 3 : 0;
        return 0;
    }
    if (c == '%') return count(a, n, p + 1, HEX, 2) == 2 ? p + 3 : 0;
    if (c == '&') {
        unsigned char g1 = AT(p + 1);
        if (!(g1 == '#' || LETTER[g1])) return 0;
        Py_ssize_t run = count(a, n, p + 1, ALNUM, 33);
        if (LETTER[g1]) {
            if (run >= 2 && run <= 32 && AT(p + 1 + run) == ';') return p + 2 + run;
            for (size_t i = 0; i < N_NAMES; i++) {
                Py_ssize_t len = (Py_ssize_t)strlen(NAMES[i]);
                if (run == len && memcmp(a + p + 1, NAMES[i], (size_t)len) == 0) return p + 1 + len;
            }
            return 0;
        }
        unsigned char g2 = AT(p + 2);
        if (DIGIT[g2]) {
            Py_ssize_t d = count(a, n, p + 2, DIGIT, 7);
            return p + 2 + d + (AT(p + 2 + d) == ';');
        }
        if (g2 == 'x' || g2 == 'X') {
            Py_ssize_t h = count(a, n, p + 3, HEX, 6);
            return h >= 1 ? p + 3 + h + (AT(p + 3 + h) == ';') : 0;
        }
        return 0;
    }
    /* '<' */
    unsigned char g1 = AT(p + 1);
    Py_ssize_t name;
    if (LETTER[g1])
        name = p + 1;
    else if (g1 == '/' && LETTER[AT(p + 2)])
        name = p + 2;
    else
        return 0;
    Py_ssize_t body = tag_body(a, n, name + 1);
    if (AT(name + 1 + body) == '>') {
        *tag = 1;
        return name + 2 + body;
    }
    return 0;
}

static int get_buffer(PyObject *obj, Py_buffer *view) {
    if (PyObject_GetBuffer(obj, view, PyBUF_SIMPLE) < 0) return -1;
    return 0;
}

PyDoc_STRVAR(project_doc,
"project(buf, lo, block) -> (letters, tops, nested, checkpoints)\n\n"
"The plain letters of buf[lo:]: its ASCII letters and digits outside every construct\n"
"that starts at or after lo, lower-cased (bytes). tops: int64 quadruples (start, end,\n"
"rank, is_tag) of the top-level constructs in order (rank: letters before it). nested:\n"
"int64 pairs (start, end) of the constructs inside tags. checkpoints: int64 pairs\n"
"(offset, letters before it) at the first loop position of every block of input bytes;\n"
"offsets are absolute in buf.");

static PyObject *project(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t lo, block;
    if (!PyArg_ParseTuple(args, "Onn", &obj, &lo, &block)) return NULL;
    Py_buffer view;
    if (get_buffer(obj, &view) < 0) return NULL;
    const unsigned char *a = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    if (lo < 0 || lo > n || block < 1) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "project: lo outside the buffer, or block < 1");
        return NULL;
    }
    PyObject *letters = PyBytes_FromStringAndSize(NULL, n - lo + 1);
    if (!letters) {
        PyBuffer_Release(&view);
        return NULL;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(letters);
    vec tops = {0}, nested = {0}, cps = {0};
    Py_ssize_t k = 0, p = lo;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    while (p < n && !err) {
        Py_ssize_t bend = p + block < n ? p + block : n;
        if (push(&cps, p) < 0 || push(&cps, k) < 0) {
            err = 1;
            break;
        }
        Py_ssize_t slow_until = p; /* bytes before this are read one by one (a construct may start there) */
        while (p < bend) {
#if HAVE_FAST
            if (fast_ok && p >= slow_until && p + 16 <= bend) {
                p = fast_letters(a, p, bend, out, &k, &slow_until);
                slow_until++;
                if (p >= bend) break;
            }
#endif
            unsigned char c = a[p];
            unsigned char cl = CLS[c];
            if (cl != 2) {
                out[k] = LOWER[c];
                k += cl;
                p++;
                continue;
            }
            int tag;
            Py_ssize_t next;
            Py_ssize_t end = construct_at(a, n, p, &tag, &next);
            if (!end) {
                p = next;
                continue;
            }
            if (push(&tops, p) < 0 || push(&tops, end) < 0 || push(&tops, k) < 0 || push(&tops, tag) < 0) {
                err = 1;
                break;
            }
            if (tag) {
                Py_ssize_t q = p + 1;
                while (q < end) {
                    if (CLS[a[q]] != 2) {
                        q++;
                        continue;
                    }
                    int t2;
                    Py_ssize_t nx;
                    Py_ssize_t e2 = construct_at(a, n, q, &t2, &nx);
                    if (!e2) {
                        q = nx;
                        continue;
                    }
                    if (push(&nested, q) < 0 || push(&nested, e2) < 0) {
                        err = 1;
                        break;
                    }
                    q = e2;
                }
                if (err) break;
            }
            p = end;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (err) {
        PyMem_Free(tops.v);
        PyMem_Free(nested.v);
        PyMem_Free(cps.v);
        Py_DECREF(letters);
        return PyErr_NoMemory();
    }
    if (_PyBytes_Resize(&letters, k) < 0) {
        PyMem_Free(tops.v);
        PyMem_Free(nested.v);
        PyMem_Free(cps.v);
        return NULL;
    }
    PyObject *t = vec_bytes(&tops), *q = vec_bytes(&nested), *c = vec_bytes(&cps);
    if (!t || !q || !c) {
        Py_XDECREF(t);
        Py_XDECREF(q);
        Py_XDECREF(c);
        Py_DECREF(letters);
        return NULL;
    }
    return Py_BuildValue("(NNNN)", letters, t, q, c);
}

PyDoc_STRVAR(locate_doc,
"locate(buf, start, count) -> offset\n\n"
"The offset of the plain letter `count` letters after a checkpoint at `start` (an\n"
"offset project() recorded), parsing constructs as project() does.\n"
"Raises IndexError when buf holds fewer plain letters after start.");

static PyObject *locate(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t p, left;
    if (!PyArg_ParseTuple(args, "Onn", &obj, &p, &left)) return NULL;
    Py_buffer view;
    if (get_buffer(obj, &view) < 0) return NULL;
    const unsigned char *a = (const unsigned char *)view.buf;
    Py_ssize_t n = view.len;
    Py_ssize_t found = -1;
    if (p >= 0 && left >= 0) {
        while (p < n) {
            unsigned char cl = CLS[a[p]];
            if (cl == 1) {
                if (left == 0) {
                    found = p;
                    break;
                }
                left--;
                p++;
            } else if (cl == 2) {
                int tag;
                Py_ssize_t next;
                Py_ssize_t end = construct_at(a, n, p, &tag, &next);
                p = end ? end : next;
            } else {
                p++;
            }
        }
    }
    PyBuffer_Release(&view);
    if (found < 0) {
        PyErr_SetString(PyExc_IndexError, "locate: no such plain letter");
        return NULL;
    }
    return PyLong_FromSsize_t(found);
}

static PyMethodDef methods[] = {
    {"project", project, METH_VARARGS, project_doc},
    {"locate", locate, METH_VARARGS, locate_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memkit.scan._letters",
    "The plain letters of a buffer for memkit's scan engine (see memkit/scan/plain.py).", -1, methods,
};

PyMODINIT_FUNC PyInit__letters(void) {
    init_tables();
#if HAVE_FAST
    init_pack();
    __builtin_cpu_init();
    fast_ok = __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("popcnt") && !getenv("MEMKIT_LETTERS_BYTEWISE");
#endif
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "ABI", LETTERS_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
