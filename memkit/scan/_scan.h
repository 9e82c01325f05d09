/* What the compiled scan passes share (memkit/scan/_wide.c, _escapes.c, _tokens.c):
 * a growable array of int64 for passes that work without the GIL (PyMem_RawRealloc,
 * no Python error set: the caller reports memory once it holds the GIL again); SSE2
 * where the compiler targets it (every x86-64 CPU), with a test of a byte range on 16
 * bytes; the value of a hex digit. Included after Python.h. */
#ifndef MEMKIT_SCAN_H
#define MEMKIT_SCAN_H

#include <Python.h>
#include <stdint.h>
#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#define HAVE_SSE2 1
#else
#define HAVE_SSE2 0
#endif

typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} vec;

/* Append a; -1 when memory runs out (nothing appended). */
static inline int push(vec *x, int64_t a) {
    if (x->n == x->cap) {
        Py_ssize_t cap = x->cap ? x->cap * 2 : 256;
        int64_t *v = (int64_t *)PyMem_RawRealloc(x->v, (size_t)cap * sizeof(int64_t));
        if (!v) return -1;
        x->v = v;
        x->cap = cap;
    }
    x->v[x->n++] = a;
    return 0;
}

/* x's int64s as bytes, or NULL with MemoryError where rc < 0 (the pass ran out of
 * memory) or the bytes cannot be made; x's memory is freed either way. With the GIL. */
static inline PyObject *vec_bytes(vec *x, int rc) {
    PyObject *r = rc < 0 ? PyErr_NoMemory()
                         : PyBytes_FromStringAndSize(x->v ? (const char *)x->v : "", x->n * (Py_ssize_t)sizeof(int64_t));
    PyMem_RawFree(x->v);
    x->v = NULL;
    x->n = x->cap = 0;
    return r;
}

#if HAVE_SSE2
/* 0xFF in each byte of x from lo to lo + n (unsigned), 0 elsewhere. */
static inline __m128i in_range(__m128i x, unsigned char lo, unsigned char n) {
    __m128i d = _mm_sub_epi8(x, _mm_set1_epi8((char)lo));
    return _mm_cmpeq_epi8(_mm_min_epu8(d, _mm_set1_epi8((char)n)), d);
}
#endif

/* The value of hex digit b (either case), or -1. */
static inline int hex_value(unsigned char b) {
    if ((unsigned)(b - '0') < 10) return b - '0';
    b |= 0x20;
    if ((unsigned)(b - 'a') < 6) return b - 'a' + 10;
    return -1;
}

#endif
