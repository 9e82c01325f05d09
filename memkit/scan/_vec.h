/* A growable array of int64 for the compiled scan passes that work without the GIL
 * (memkit/scan/_wide.c, memkit/scan/_escapes.c): PyMem_RawRealloc, no Python error set
 * (the caller reports memory once it holds the GIL again). */
#ifndef MEMKIT_SCAN_VEC_H
#define MEMKIT_SCAN_VEC_H

#include <Python.h>
#include <stdint.h>

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

#endif
