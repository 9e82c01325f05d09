/* memkit.scan._names: which secrets a window of spelling events names, all at once.
 *
 * memkit/scan/windows.py turns a window's bytes into spelling events (one byte each:
 * a plain letter or digit as itself, lower case; a special one as upper case or
 * 0x80 + digit; a non-ASCII skeleton character as a code from 0x90 on; a breaker as
 * 0x00). A secret is named when its skeleton reads in the events with only specials
 * between its characters: the pattern U1 S* U2 S* ... Um, where a unit Uj accepts
 * the plain and the special event of the character (a non-ASCII one: its code) and S
 * is any special (0x41-0x5A, 0x80-0xFE).
 *
 * Every secret's pattern is one path in a trie keyed by each unit's special code (a
 * plain event is keyed by the special code of its character, which no non-ASCII code
 * equals). find() runs that trie as a nondeterministic automaton over the events:
 * the set of live nodes is advanced by each event (a node whose child has the event's
 * key moves there; a special may also be skipped, leaving the node live; a plain event
 * that no node takes ends it; a breaker ends all), the root is live at every event,
 * and a node reached that ends a skeleton names its secrets. It accepts exactly what
 * the secrets' patterns, each searched alone, accept (tests/test_scan_engine.py checks
 * it against those patterns in Python's re), in time linear in the events times the
 * live nodes (a few on text: most prefixes die at the next plain event).
 *
 * build(keys, order) -> bytes: the trie of the keys (bytes of unit codes, none empty;
 * order: their indices sorted by key) as a flat array of int32: N nodes, E edges, T
 * ends, the root's 256 children, then per node its first edge (N+1), each edge's key
 * and child, per node its first end (N+1), and each end's key index.
 * find(trie, events) -> list[(key index, first, last)]: for each key, the stretches of
 * events its pattern reads in: every reading ends in [first, last] and begins in
 * [first, its end] (each live node carries the earliest event a reading of it began
 * at), sorted. memkit/scan/windows.py maps them back to the window's bytes.
 *
 * covered(masks, counts, words, windows) -> bytes: which windows hold every skeleton
 * character of some secret (bit masks; the prefilter before a window's events are read).
 *
 * windows(buf, ends, lo, limit, n_min, reach, near, units, breakers) -> bytes: the merged
 * windows of the tokens ending at `ends` (TokenWindows.find in memkit/scan/windows.py
 * says what they are; tests/test_scan_names.py holds this to the numpy reading it
 * replaced), as int64 pairs.
 *
 * events(content, covers, nonascii, breakers, xpos, xcodes) -> (bytes, bytes): a window's
 * spelling events (TokenWindows.events says what they are) from the per-byte part of
 * them: each ASCII letter or digit plain (lower case), or special where it lies in a
 * cover (int64 start, end pairs; they may overlap) or, with nonascii, before a byte
 * >= 0x80 or a backslash; each breaker (the 256-byte table breakers) as 0x00; merged
 * with the events the caller decoded (xpos int64, sorted; xcodes one byte each), a
 * byte's own event before those at its offset. Returns the events and their offsets
 * (int64). tests/test_scan_names.py holds it to the numpy reading it replaced.
 *
 * C99 against the stable parts of the CPython API; no -march.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NAMES_ABI 5 /* memkit/scan/windows.py checks it: a stale build is reported */

static unsigned char KEY[256];     /* an event's key; 0: matches nothing (a breaker) */
static unsigned char SPECIAL[256]; /* 1: a special event, which may be skipped */

static void init_tables(void) {
    for (int c = 0; c < 256; c++) {
        int special = (c >= 0x41 && c <= 0x5A) || (c >= 0x80 && c <= 0xFE);
        SPECIAL[c] = (unsigned char)special;
        if (special)
            KEY[c] = (unsigned char)c;
        else if (c >= 'a' && c <= 'z')
            KEY[c] = (unsigned char)(c - 32);
        else if (c >= '0' && c <= '9')
            KEY[c] = (unsigned char)(0x80 + c - '0');
        else
            KEY[c] = 0;
    }
}

typedef struct {
    int32_t parent, key, child;
} edge_t;

static int grow(void **buf, Py_ssize_t *cap, Py_ssize_t need, size_t item) {
    if (need <= *cap)
        return 0;
    Py_ssize_t n = *cap ? *cap : 64;
    while (n < need)
        n *= 2;
    void *p = realloc(*buf, (size_t)n * item);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = p;
    *cap = n;
    return 0;
}

PyDoc_STRVAR(build_doc, "build(keys, order) -> bytes\n\n"
                        "The trie of ``keys`` (a list of non-empty bytes; ``order``: their "
                        "indices sorted by key) for find().");

static PyObject *build(PyObject *self, PyObject *args) {
    PyObject *keys, *order;
    if (!PyArg_ParseTuple(args, "O!O!", &PyList_Type, &keys, &PyList_Type, &order))
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    if (PyList_GET_SIZE(order) != n) {
        PyErr_SetString(PyExc_ValueError, "build: order and keys differ in length");
        return NULL;
    }
    edge_t *edges = NULL;
    int32_t *ends = NULL; /* (node, key index) pairs */
    int32_t *path = NULL; /* node at each depth of the previous key */
    Py_ssize_t e_cap = 0, x_cap = 0, p_cap = 0, n_edges = 0, n_ends = 0;
    int32_t n_nodes = 1;
    const char *prev = NULL;
    Py_ssize_t prev_len = 0;
    PyObject *out = NULL;
    for (Py_ssize_t r = 0; r < n; r++) {
        Py_ssize_t i = PyLong_AsSsize_t(PyList_GET_ITEM(order, r));
        if (i == -1 && PyErr_Occurred())
            goto done;
        if (i < 0 || i >= n) {
            PyErr_SetString(PyExc_ValueError, "build: an index in order is out of range");
            goto done;
        }
        PyObject *k = PyList_GET_ITEM(keys, i);
        if (!PyBytes_Check(k) || PyBytes_GET_SIZE(k) == 0) {
            PyErr_SetString(PyExc_ValueError, "build: each key must be non-empty bytes");
            goto done;
        }
        const char *s = PyBytes_AS_STRING(k);
        Py_ssize_t len = PyBytes_GET_SIZE(k);
        Py_ssize_t lcp = 0;
        while (prev != NULL && lcp < len && lcp < prev_len && s[lcp] == prev[lcp])
            lcp++;
        if (prev != NULL && lcp < len && lcp < prev_len && (unsigned char)s[lcp] < (unsigned char)prev[lcp]) {
            PyErr_SetString(PyExc_ValueError, "build: order does not sort the keys");
            goto done;
        }
        if (grow((void **)&path, &p_cap, len + 1, sizeof(int32_t)) < 0)
            goto done;
        path[0] = 0;
        for (Py_ssize_t d = lcp; d < len; d++) {
            if (grow((void **)&edges, &e_cap, n_edges + 1, sizeof(edge_t)) < 0)
                goto done;
            if (n_nodes == INT32_MAX) {
                PyErr_SetString(PyExc_OverflowError, "build: too many trie nodes");
                goto done;
            }
            edges[n_edges].parent = path[d];
            edges[n_edges].key = (unsigned char)s[d];
            edges[n_edges].child = n_nodes;
            n_edges++;
            path[d + 1] = n_nodes++;
        }
        if (grow((void **)&ends, &x_cap, 2 * (n_ends + 1), sizeof(int32_t)) < 0)
            goto done;
        ends[2 * n_ends] = path[len];
        ends[2 * n_ends + 1] = (int32_t)i;
        n_ends++;
        prev = s;
        prev_len = len;
    }
    {
        /* layout: N, E, T, root[256], first_edge[N+1], key[E], child[E], first_end[N+1], end[T] */
        Py_ssize_t words = 3 + 256 + (n_nodes + 1) + 2 * n_edges + (n_nodes + 1) + n_ends;
        out = PyBytes_FromStringAndSize(NULL, words * (Py_ssize_t)sizeof(int32_t));
        if (out == NULL)
            goto done;
        int32_t *w = (int32_t *)PyBytes_AS_STRING(out);
        memset(w, 0, (size_t)words * sizeof(int32_t));
        w[0] = n_nodes;
        w[1] = (int32_t)n_edges;
        w[2] = (int32_t)n_ends;
        int32_t *root = w + 3, *first = root + 256, *ekey = first + n_nodes + 1, *echild = ekey + n_edges;
        int32_t *xfirst = echild + n_edges, *xid = xfirst + n_nodes + 1;
        for (int c = 0; c < 256; c++)
            root[c] = -1;
        /* counting sort by parent: creation order keeps each node's edges sorted by key */
        for (Py_ssize_t j = 0; j < n_edges; j++)
            first[edges[j].parent + 1]++;
        for (int32_t v = 0; v < n_nodes; v++)
            first[v + 1] += first[v];
        int32_t *fill = calloc((size_t)n_nodes + 1, sizeof(int32_t));
        if (fill == NULL) {
            Py_CLEAR(out);
            PyErr_NoMemory();
            goto done;
        }
        for (Py_ssize_t j = 0; j < n_edges; j++) {
            int32_t v = edges[j].parent, at = first[v] + fill[v]++;
            ekey[at] = edges[j].key;
            echild[at] = edges[j].child;
            if (v == 0)
                root[edges[j].key] = edges[j].child;
        }
        memset(fill, 0, ((size_t)n_nodes + 1) * sizeof(int32_t));
        for (Py_ssize_t j = 0; j < n_ends; j++)
            xfirst[ends[2 * j] + 1]++;
        for (int32_t v = 0; v < n_nodes; v++)
            xfirst[v + 1] += xfirst[v];
        for (Py_ssize_t j = 0; j < n_ends; j++) {
            int32_t v = ends[2 * j];
            xid[xfirst[v] + fill[v]++] = ends[2 * j + 1];
        }
        free(fill);
    }
done:
    free(edges);
    free(ends);
    free(path);
    return out;
}

static int cmp_triple(const void *a, const void *b) {
    const int32_t *x = (const int32_t *)a, *y = (const int32_t *)b;
    for (int k = 0; k < 3; k++)
        if (x[k] != y[k])
            return (x[k] > y[k]) - (x[k] < y[k]);
    return 0;
}

/* Append (key, a, b) for the keys ending at a node (xid[x0:x1]); -1 when memory runs
 * out (no Python call: find() runs without the GIL). */
static int put(int32_t **out, Py_ssize_t *n_out, Py_ssize_t *cap, const int32_t *xid, int32_t x0, int32_t x1,
               int32_t a, int32_t b) {
    Py_ssize_t need = *n_out + 3 * (Py_ssize_t)(x1 - x0);
    if (need > *cap) {
        Py_ssize_t n = *cap ? *cap : 192;
        while (n < need)
            n *= 2;
        int32_t *q = realloc(*out, sizeof(int32_t) * (size_t)n);
        if (q == NULL)
            return -1;
        *out = q;
        *cap = n;
    }
    for (int32_t x = x0; x < x1; x++) {
        (*out)[(*n_out)++] = xid[x];
        (*out)[(*n_out)++] = a;
        (*out)[(*n_out)++] = b;
    }
    return 0;
}

PyDoc_STRVAR(find_doc, "find(trie, events) -> list[tuple[int, int, int]]\n\n"
                       "``(key index, first, last)`` for each stretch of ``events`` in which a "
                       "key's pattern reads (module doc): every reading ends at an event in "
                       "``[first, last]`` and begins at one in ``[first, its end]``; sorted.");

static PyObject *find(PyObject *self, PyObject *args) {
    Py_buffer tb, eb;
    if (!PyArg_ParseTuple(args, "y*y*", &tb, &eb))
        return NULL;
    PyObject *result = NULL;
    int32_t *live = NULL, *next = NULL, *live_s = NULL, *next_s = NULL, *slot = NULL;
    int32_t *run_a = NULL, *run_b = NULL, *out = NULL;
    uint32_t *stamp = NULL;
    Py_ssize_t n_out = 0, out_cap = 0;
    const int32_t *w = (const int32_t *)tb.buf;
    if (tb.len < (Py_ssize_t)(259 * sizeof(int32_t))) {
        PyErr_SetString(PyExc_ValueError, "find: not a trie from build()");
        goto done;
    }
    int32_t n_nodes = w[0], n_edges = w[1], n_ends = w[2];
    Py_ssize_t words = 3 + 256 + (Py_ssize_t)(n_nodes + 1) * 2 + 2 * (Py_ssize_t)n_edges + n_ends;
    if (n_nodes < 1 || n_edges < 0 || n_ends < 0 || tb.len != words * (Py_ssize_t)sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "find: not a trie from build()");
        goto done;
    }
    const int32_t *root = w + 3, *first = root + 256, *ekey = first + n_nodes + 1, *echild = ekey + n_edges;
    const int32_t *xfirst = echild + n_edges, *xid = xfirst + n_nodes + 1;
    size_t nn = (size_t)n_nodes;
    live = malloc(sizeof(int32_t) * nn);
    next = malloc(sizeof(int32_t) * nn);
    live_s = malloc(sizeof(int32_t) * nn);
    next_s = malloc(sizeof(int32_t) * nn);
    slot = malloc(sizeof(int32_t) * nn);
    run_a = malloc(sizeof(int32_t) * nn); /* per end node: its open stretch, [run_a, run_b] */
    run_b = malloc(sizeof(int32_t) * nn);
    stamp = calloc(nn, sizeof(uint32_t));
    if (!live || !next || !live_s || !next_s || !slot || !run_a || !run_b || !stamp) {
        PyErr_NoMemory();
        goto done;
    }
    for (size_t v = 0; v < nn; v++)
        run_a[v] = -1;
    const unsigned char *ev = (const unsigned char *)eb.buf;
    Py_ssize_t n_ev = eb.len;
    if (n_ev > INT32_MAX - 2) {
        PyErr_SetString(PyExc_OverflowError, "find: too many events");
        goto done;
    }
    int32_t n_live = 0;
    uint32_t gen = 0;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int32_t p = 0; p < (int32_t)n_ev && !failed; p++) {
        unsigned char e = ev[p], key = KEY[e];
        if (key == 0) {
            n_live = 0;
            continue;
        }
        if (++gen == 0) { /* wrapped: clear the stamps */
            memset(stamp, 0, sizeof(uint32_t) * nn);
            gen = 1;
        }
        int32_t n_next = 0;
        if (SPECIAL[e]) { /* skipped: every live node stays, with its earliest start */
            for (int32_t j = 0; j < n_live; j++) {
                stamp[live[j]] = gen;
                slot[live[j]] = n_next;
                next_s[n_next] = live_s[j];
                next[n_next++] = live[j];
            }
        }
        for (int32_t j = -1; j < n_live; j++) {
            int32_t child, start;
            if (j < 0) {
                child = root[key];
                start = p;
            } else {
                int32_t lo = first[live[j]], hi = first[live[j] + 1];
                child = -1;
                while (lo < hi) {
                    int32_t mid = lo + (hi - lo) / 2;
                    if (ekey[mid] < key)
                        lo = mid + 1;
                    else
                        hi = mid;
                }
                if (lo < first[live[j] + 1] && ekey[lo] == key)
                    child = echild[lo];
                start = live_s[j];
            }
            if (child < 0)
                continue;
            if (stamp[child] == gen) {
                if (start < next_s[slot[child]])
                    next_s[slot[child]] = start;
                continue;
            }
            stamp[child] = gen;
            slot[child] = n_next;
            next_s[n_next] = start;
            next[n_next++] = child;
        }
        for (int32_t j = 0; j < n_next; j++) { /* end nodes live here: their stretches */
            int32_t v = next[j];
            if (xfirst[v] == xfirst[v + 1])
                continue;
            if (run_a[v] >= 0 && next_s[j] <= run_b[v] + 1) {
                if (next_s[j] < run_a[v])
                    run_a[v] = next_s[j];
                run_b[v] = p;
                continue;
            }
            if (run_a[v] >= 0 && put(&out, &n_out, &out_cap, xid, xfirst[v], xfirst[v + 1], run_a[v], run_b[v]) < 0) {
                failed = 1;
                break;
            }
            run_a[v] = next_s[j];
            run_b[v] = p;
        }
        int32_t *t = live;
        live = next;
        next = t;
        t = live_s;
        live_s = next_s;
        next_s = t;
        n_live = n_next;
    }
    if (!failed) { /* the stretches still open */
        for (int32_t v = 0; v < n_nodes && !failed; v++) {
            if (run_a[v] >= 0 && put(&out, &n_out, &out_cap, xid, xfirst[v], xfirst[v + 1], run_a[v], run_b[v]) < 0)
                failed = 1;
        }
    }
    if (!failed && n_out)
        qsort(out, (size_t)(n_out / 3), 3 * sizeof(int32_t), cmp_triple);
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    result = PyList_New(n_out / 3);
    if (result == NULL)
        goto done;
    for (Py_ssize_t j = 0; j < n_out / 3; j++) {
        PyObject *v = Py_BuildValue("(iii)", out[3 * j], out[3 * j + 1], out[3 * j + 2]);
        if (v == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, j, v);
    }
done:
    free(live);
    free(next);
    free(live_s);
    free(next_s);
    free(slot);
    free(run_a);
    free(run_b);
    free(stamp);
    free(out);
    PyBuffer_Release(&tb);
    PyBuffer_Release(&eb);
    return result;
}

PyDoc_STRVAR(covered_doc, "covered(masks, counts, words, windows) -> bytes\n\n"
                          "For each window's character mask (``words`` uint64 each), 1 where some "
                          "secret's mask (``masks``, sorted by ``counts``, their bit counts, "
                          "ascending) lies inside it, else 0.");

static int popcount64(uint64_t x) {
    int n = 0;
    while (x) {
        x &= x - 1;
        n++;
    }
    return n;
}

static PyObject *covered(PyObject *self, PyObject *args) {
    Py_buffer mb, cb, wb;
    Py_ssize_t words;
    if (!PyArg_ParseTuple(args, "y*y*ny*", &mb, &cb, &words, &wb))
        return NULL;
    PyObject *out = NULL;
    Py_ssize_t row = words * (Py_ssize_t)sizeof(uint64_t);
    if (words < 1 || mb.len % row || wb.len % row || cb.len != (mb.len / row) * (Py_ssize_t)sizeof(int32_t)) {
        PyErr_SetString(PyExc_ValueError, "covered: masks, counts and windows disagree in size");
        goto done;
    }
    Py_ssize_t n = mb.len / row, m = wb.len / row;
    const uint64_t *sm = (const uint64_t *)mb.buf, *wm = (const uint64_t *)wb.buf;
    const int32_t *cnt = (const int32_t *)cb.buf;
    out = PyBytes_FromStringAndSize(NULL, m);
    if (out == NULL)
        goto done;
    char *flag = PyBytes_AS_STRING(out);
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t k = 0; k < m; k++) {
        const uint64_t *w = wm + k * words;
        int have = 0;
        for (Py_ssize_t x = 0; x < words; x++)
            have += popcount64(w[x]);
        char hit = 0;
        for (Py_ssize_t j = 0; j < n && cnt[j] <= have && !hit; j++) {
            const uint64_t *s = sm + j * words;
            Py_ssize_t x = 0;
            while (x < words && (s[x] & ~w[x]) == 0)
                x++;
            hit = x == words;
        }
        flag[k] = hit;
    }
    Py_END_ALLOW_THREADS
done:
    PyBuffer_Release(&mb);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&wb);
    return out;
}

static int cmp_ssize(const void *a, const void *b) {
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    return (x > y) - (x < y);
}

PyDoc_STRVAR(windows_doc, "windows(buf, ends, lo, limit, n_min, reach, near, units, breakers) -> bytes\n\n"
                          "The merged windows (int64 start, end pairs) of the tokens ending at ends.");

static PyObject *windows(PyObject *self, PyObject *args) {
    Py_buffer bb, ub, kb;
    PyObject *ends_obj;
    Py_ssize_t lo, limit, n_min, reach, near;
    if (!PyArg_ParseTuple(args, "y*Onnnnny*y*", &bb, &ends_obj, &lo, &limit, &n_min, &reach, &near, &ub, &kb))
        return NULL;
    PyObject *out = NULL, *seq = NULL;
    Py_ssize_t *q = NULL, *lbs = NULL;
    int64_t *res = NULL;
    if (ub.len != 256 || kb.len != 256 || near < 16) {
        PyErr_SetString(PyExc_ValueError, "windows: units and breakers are 256-byte tables; near >= 16");
        goto done;
    }
    seq = PySequence_Fast(ends_obj, "windows: ends must be a sequence of ints");
    if (seq == NULL)
        goto done;
    Py_ssize_t m = PySequence_Fast_GET_SIZE(seq), k = 0;
    q = (Py_ssize_t *)PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(m ? m : 1));
    lbs = (Py_ssize_t *)PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(m ? m : 1));
    res = (int64_t *)PyMem_Malloc(sizeof(int64_t) * 2 * (size_t)(m ? m : 1));
    if (!q || !lbs || !res) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < m; i++) {
        Py_ssize_t e = PyLong_AsSsize_t(PySequence_Fast_GET_ITEM(seq, i));
        if (e == -1 && PyErr_Occurred())
            goto done;
        q[i] = e - 1;
    }
    qsort(q, (size_t)m, sizeof(Py_ssize_t), cmp_ssize);
    for (Py_ssize_t i = 0; i < m; i++) /* unique */
        if (k == 0 || q[i] != q[k - 1])
            q[k++] = q[i];
    const unsigned char *a = (const unsigned char *)bb.buf, *unit = (const unsigned char *)ub.buf,
                        *brk = (const unsigned char *)kb.buf;
    Py_ssize_t n = bb.len, kept = 0, nout = 0;
    Py_BEGIN_ALLOW_THREADS
    /* drop the tokens whose stretch between breakers (both within `near`, or 16, bytes)
     * holds fewer than n_min bytes a spelling needs; keep each other one's first byte
     * after the last breaker before it, where one is that near (else -1) */
    for (Py_ssize_t i = 0; i < k; i++) {
        Py_ssize_t qi = q[i], bl = -1, br = -1;
        if (qi < 0)
            continue; /* no token ends before the buffer (nor is a byte past it read below) */
        for (Py_ssize_t p = (qi - 1 < n - 1 ? qi - 1 : n - 1); p >= 0 && p >= qi - near; p--)
            if (brk[a[p]]) {
                bl = p;
                break;
            }
        for (Py_ssize_t p = qi + 1; p < n && p <= qi + near; p++)
            if (brk[a[p]]) {
                br = p;
                break;
            }
        int left16 = bl >= 0 && qi >= 16 && bl >= qi - 16, leftn = bl >= 0 && qi >= near;
        int closed = (left16 && br >= 0 && br <= qi + 16 && qi + 16 < n) ||
                     (leftn && br >= 0 && qi + near < n);
        if (closed) {
            Py_ssize_t units = 0;
            for (Py_ssize_t p = bl + 1; p < br; p++)
                units += unit[a[p]] != 0;
            if (units < n_min)
                continue;
        }
        q[kept] = qi;
        lbs[kept++] = left16 || leftn ? bl + 1 : -1;
    }
    /* each kept token's window: from the last breaker before it (read once, left to
     * right, where none is near), at most `reach` bytes back, to 4 bytes after it;
     * windows that meet are merged */
    Py_ssize_t scanned = -reach - 1, far_lb = 0;
    for (Py_ssize_t i = 0; i < kept; i++) {
        Py_ssize_t qi = q[i], lbi = lbs[i];
        if (lbi < 0) {
            int far = qi - scanned > reach;
            Py_ssize_t lo_s = far ? (qi - reach > 0 ? qi - reach : 0) : scanned;
            Py_ssize_t last = -1;
            for (Py_ssize_t p = (qi - 1 < n - 1 ? qi - 1 : n - 1); p >= lo_s; p--)
                if (brk[a[p]]) {
                    last = p;
                    break;
                }
            if (last >= 0)
                far_lb = last + 1;
            else if (far)
                far_lb = lo_s;
            scanned = qi;
            lbi = far_lb;
        }
        Py_ssize_t w0 = lo, w1 = qi + 1 + 4 < limit ? qi + 1 + 4 : limit;
        if (lbi > w0)
            w0 = lbi;
        if (qi + 1 - reach > w0)
            w0 = qi + 1 - reach;
        if (w0 >= w1)
            continue;
        if (nout && w0 <= res[2 * nout - 1]) {
            if (w1 > res[2 * nout - 1])
                res[2 * nout - 1] = w1;
        } else {
            res[2 * nout] = w0;
            res[2 * nout + 1] = w1;
            nout++;
        }
    }
    Py_END_ALLOW_THREADS
    out = PyBytes_FromStringAndSize((const char *)res, (Py_ssize_t)(2 * nout * (Py_ssize_t)sizeof(int64_t)));
done:
    PyMem_Free(q);
    PyMem_Free(lbs);
    PyMem_Free(res);
    Py_XDECREF(seq);
    PyBuffer_Release(&bb);
    PyBuffer_Release(&ub);
    PyBuffer_Release(&kb);
    return out;
}

PyDoc_STRVAR(events_doc, "events(content, covers, nonascii, breakers, xpos, xcodes) -> (bytes, bytes)\n\n"
                         "A window's spelling events and their int64 offsets (module doc).");

static PyObject *events(PyObject *self, PyObject *args) {
    Py_buffer cb, vb, kb, pb, xb;
    int nonascii;
    if (!PyArg_ParseTuple(args, "y*y*py*y*y*", &cb, &vb, &nonascii, &kb, &pb, &xb))
        return NULL;
    PyObject *out = NULL, *codes = NULL, *offsets = NULL;
    int32_t *depth = NULL;
    if (kb.len != 256 || vb.len % (2 * (Py_ssize_t)sizeof(int64_t)) ||
        pb.len != xb.len * (Py_ssize_t)sizeof(int64_t)) {
        PyErr_SetString(PyExc_ValueError, "events: breakers, covers or extra events disagree in size");
        goto done;
    }
    const unsigned char *buf = (const unsigned char *)cb.buf, *brk = (const unsigned char *)kb.buf;
    const unsigned char *xc = (const unsigned char *)xb.buf;
    const int64_t *cov = (const int64_t *)vb.buf, *xp = (const int64_t *)pb.buf;
    Py_ssize_t n = cb.len, nc = vb.len / (2 * (Py_ssize_t)sizeof(int64_t)), nx = xb.len;
    depth = PyMem_Calloc((size_t)n + 1, sizeof(int32_t));
    codes = PyBytes_FromStringAndSize(NULL, n + nx);
    offsets = PyBytes_FromStringAndSize(NULL, (n + nx) * (Py_ssize_t)sizeof(int64_t));
    if (depth == NULL || codes == NULL || offsets == NULL) {
        if (!PyErr_Occurred())
            PyErr_NoMemory();
        goto done;
    }
    unsigned char *code = (unsigned char *)PyBytes_AS_STRING(codes);
    int64_t *at = (int64_t *)PyBytes_AS_STRING(offsets);
    Py_ssize_t k = 0, j = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t c = 0; c < nc; c++) {
        int64_t s = cov[2 * c], e = cov[2 * c + 1];
        if (s < 0)
            s = 0;
        if (e > n)
            e = n;
        if (s < e) {
            depth[s]++;
            depth[e]--;
        }
    }
    int32_t run = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        run += depth[i];
        unsigned char b = buf[i];
        int letter = (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z'), digit = b >= '0' && b <= '9';
        if (!(letter || digit || brk[b]))
            continue;
        while (j < nx && xp[j] < i) {
            at[k] = xp[j];
            code[k++] = xc[j++];
        }
        unsigned char ev = 0;
        if (brk[b]) {
            ev = 0;
        } else {
            int inside = run > 0 || (nonascii && i + 1 < n && (buf[i + 1] >= 0x80 || buf[i + 1] == '\\'));
            unsigned char low = (unsigned char)(b >= 'A' && b <= 'Z' ? b + 32 : b);
            ev = !inside ? low : letter ? (unsigned char)(low - 32) : (unsigned char)(0x80 + low - '0');
        }
        at[k] = i;
        code[k++] = ev;
    }
    while (j < nx) {
        at[k] = xp[j];
        code[k++] = xc[j++];
    }
    Py_END_ALLOW_THREADS
    if (_PyBytes_Resize(&codes, k) < 0 || _PyBytes_Resize(&offsets, k * (Py_ssize_t)sizeof(int64_t)) < 0)
        goto done;
    out = PyTuple_Pack(2, codes, offsets);
done:
    Py_XDECREF(codes);
    Py_XDECREF(offsets);
    PyMem_Free(depth);
    PyBuffer_Release(&cb);
    PyBuffer_Release(&vb);
    PyBuffer_Release(&kb);
    PyBuffer_Release(&pb);
    PyBuffer_Release(&xb);
    return out;
}

static PyMethodDef methods[] = {
    {"events", events, METH_VARARGS, events_doc},
    {"windows", windows, METH_VARARGS, windows_doc},
    {"covered", covered, METH_VARARGS, covered_doc},
    {"build", build, METH_VARARGS, build_doc},
    {"find", find, METH_VARARGS, find_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memkit.scan._names",
    "Which secrets a window of spelling events names, all at once (memkit/scan/_names.c).", -1, methods,
};

PyMODINIT_FUNC PyInit__names(void) {
    init_tables();
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    if (PyModule_AddIntConstant(m, "ABI", NAMES_ABI) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
