/* memkit.scan._wide: the stretches of a buffer that can hold text in UTF-16 or UTF-32, for
 * memkit/scan/encodings.py, in one pass over the bytes.
 *
 * A reading is an encoding (UTF-16 LE/BE, UTF-32 LE/BE) at an alignment. A run of a
 * reading is a maximal sequence of its code units that are each in the alphabet table
 * (the units a copy of a secret can hold) or within `reach` units after a '<' unit
 * followed by an ASCII letter, '/' or '!' (an HTML tag or comment may hold anything
 * but '<', '>' and control characters); runs of at least `min_len` units, with room
 * for `spellings` spellings of a secret's characters, are
 * transcoded to UTF-8 exactly as Python's codecs decode them with errors="replace".
 *
 * Skip proofs (each a necessary condition for a unit to be in a run, checked on 64
 * bytes at a time; only the stretches that pass are read unit by unit):
 *  - UTF-16: a unit in the table has its high byte in the table's high-byte ranges
 *    (`ranges`, a superset computed from the table) and is not 0x0000; a forced unit
 *    follows a '<' unit, whose bytes are 0x3C next to a NUL. So with h = "byte in the
 *    ranges", a unit whose high byte sits at q is in a run only if h[q] and a byte of
 *    q-1..q+1 is not NUL (the BE unit at q, the LE unit at q-1), or q is less than
 *    2 * reach bytes after a '<' unit's high byte of the same parity.
 *  - UTF-32: a unit in the table is at most 0x10FFFF (its high byte is NUL) and is not
 *    0; a forced one follows 3C 00 00 00 or 00 00 00 3C within 4 * reach bytes.
 *  - a run of `min_len` units of one reading covers `min_len` positions of one residue
 *    (mod 2 or 4) that pass the condition, at most 2 (4) bytes apart: stretches where
 *    no such chain exists are skipped (the positions of the other residues are filled
 *    with ones and runs of ones of the corresponding length are looked for).
 *  - two common stretches are skipped a word (64 bytes) at a time by a tight AVX2 loop
 *    that needs neither the other masks nor the forced stretches: bytes without a NUL
 *    (text: every unit around is nonzero, so a position passes exactly where its byte
 *    is in the ranges, and nothing can be UTF-32), and all-NUL bytes (a database
 *    page's free space: nothing passes).
 * tests/test_wide.py holds the result to a unit-by-unit reading on random data and on
 * long stretches of both kinds.
 *
 * C99 against the stable parts of the CPython API; SSE2 (every x86-64 CPU) where the
 * compiler targets it, the same masks byte by byte elsewhere.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "_scan.h"

#define WIDE_ABI 2 /* memkit/scan/encodings.py checks it: a stale build is reported */
static int best_how = 0; /* the fastest masks this CPU has (set at module init) */
#define MAX_RANGES 16

enum { K16LE = 0, K16BE = 1, K32LE = 2, K32BE = 3 };


typedef struct {
    unsigned char *p;
    Py_ssize_t n, cap;
} sbuf;

static int reserve(sbuf *s, Py_ssize_t more) {
    if (s->n + more <= s->cap) return 0;
    Py_ssize_t cap = s->cap ? s->cap : 4096;
    while (cap < s->n + more) cap *= 2;
    unsigned char *p = (unsigned char *)PyMem_RawRealloc(s->p, (size_t)cap);
    if (!p) return -1;
    s->p = p;
    s->cap = cap;
    return 0;
}

typedef struct {
    const unsigned char *a;
    Py_ssize_t lo, hi;
    const unsigned char *t16; /* 65536 bytes: nonzero where the UTF-16 unit is in the alphabet */
    const unsigned char *t32; /* bitset over code points 0..0x10FFFF */
    const unsigned char *fold;  /* bitset over code points: characters that fold to several */
    const unsigned char *spell; /* bitset over code points: characters that can spell one */
    Py_ssize_t spellings;       /* fewest spellings any copy holds */
    int folds;                  /* the run being written holds a fold character */
    Py_ssize_t weight;          /* spellings the run being written has room for */
    Py_ssize_t m;             /* min_len: fewest units a run needs */
    Py_ssize_t reach;         /* units a '<' unit forces into its run, itself included */
    vec runs;                 /* per run: kind, start, end, utf8 offset, char offset, chars */
    sbuf out;                 /* the runs in UTF-8, each followed by one NUL */
    Py_ssize_t chars;         /* characters in out so far (NULs included) */
    int err;
} ctx;

/* ------------------------------------------------------------------ transcoding */

static inline void put(ctx *c, uint32_t cp) {
    unsigned char *p = c->out.p + c->out.n;
    if (cp < 0x110000) {
        int f = c->fold[cp >> 3] >> (cp & 7) & 1;
        c->folds |= f;
        /* a fold character spells up to three skeleton characters */
        c->weight += f ? 3 : (c->spell[cp >> 3] >> (cp & 7) & 1);
    }
    if (cp < 0x80) {
        p[0] = (unsigned char)cp;
        c->out.n += 1;
    } else if (cp < 0x800) {
        p[0] = (unsigned char)(0xC0 | (cp >> 6));
        p[1] = (unsigned char)(0x80 | (cp & 0x3F));
        c->out.n += 2;
    } else if (cp < 0x10000) {
        p[0] = (unsigned char)(0xE0 | (cp >> 12));
        p[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        p[2] = (unsigned char)(0x80 | (cp & 0x3F));
        c->out.n += 3;
    } else {
        p[0] = (unsigned char)(0xF0 | (cp >> 18));
        p[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        p[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        p[3] = (unsigned char)(0x80 | (cp & 0x3F));
        c->out.n += 4;
    }
    c->chars++;
}

static inline uint32_t u16(const unsigned char *a, Py_ssize_t p, int big) {
    return big ? ((uint32_t)a[p] << 8 | a[p + 1]) : ((uint32_t)a[p + 1] << 8 | a[p]);
}

static inline uint32_t u32(const unsigned char *a, Py_ssize_t p, int big) {
    return big ? ((uint32_t)a[p] << 24 | (uint32_t)a[p + 1] << 16 | (uint32_t)a[p + 2] << 8 | a[p + 3])
               : ((uint32_t)a[p + 3] << 24 | (uint32_t)a[p + 2] << 16 | (uint32_t)a[p + 1] << 8 | a[p]);
}

/* One run [s, e): its record, then its text in UTF-8 as Python decodes it with
 * errors="replace" (an unpaired surrogate, or a UTF-32 unit that is no scalar value,
 * is one U+FFFD), then a NUL. */
static void emit(ctx *c, int kind, Py_ssize_t s, Py_ssize_t e) {
    if (c->err) return;
    Py_ssize_t n = e - s;
    if (reserve(&c->out, 2 * n + 8) < 0) {
        c->err = 1;
        return;
    }
    Py_ssize_t out0 = c->out.n, chars0 = c->chars;
    const unsigned char *a = c->a;
    c->folds = 0;
    c->weight = 0;
    if (kind == K16LE || kind == K16BE) {
        int big = kind == K16BE;
        Py_ssize_t p = s;
        while (p < e) {
            uint32_t u = u16(a, p, big);
            if (u < 0xD800 || u > 0xDFFF) {
                put(c, u);
                p += 2;
                continue;
            }
            if (u <= 0xDBFF && p + 4 <= e) {
                uint32_t v = u16(a, p + 2, big);
                if (v >= 0xDC00 && v <= 0xDFFF) {
                    put(c, 0x10000 + ((u - 0xD800) << 10) + (v - 0xDC00));
                    p += 4;
                    continue;
                }
            }
            put(c, 0xFFFD);
            p += 2;
        }
    } else {
        int big = kind == K32BE;
        for (Py_ssize_t p = s; p < e; p += 4) {
            uint32_t u = u32(a, p, big);
            put(c, (u > 0x10FFFF || (u >= 0xD800 && u <= 0xDFFF)) ? 0xFFFD : u);
        }
    }
    if (c->weight < c->spellings) { /* too few spellings for any copy: not a run to match */
        c->out.n = out0;
        c->chars = chars0;
        return;
    }
    c->out.p[c->out.n++] = 0;
    c->chars++;
    if (push(&c->runs, kind) < 0 || push(&c->runs, s) < 0 || push(&c->runs, e) < 0 || push(&c->runs, out0) < 0 ||
        push(&c->runs, chars0) < 0 || push(&c->runs, c->chars - 1 - chars0) < 0 || push(&c->runs, c->folds) < 0)
        c->err = 1;
}

/* ------------------------------------------------------------------ exact readings */

/* Whether the unit after a '<' unit at p can go on to a tag or comment (an ASCII
 * letter, '/' or '!'): only then may the units after it be anything. */
static inline int tag_start(uint32_t v) { return (v | 0x20) - 'a' < 26 || v == '/' || v == '!'; }

static inline int tag16(ctx *c, Py_ssize_t p, int big) { return p + 4 <= c->hi && tag_start(u16(c->a, p + 2, big)); }

static inline int tag32(ctx *c, Py_ssize_t p, int big) { return p + 8 <= c->hi && tag_start(u32(c->a, p + 4, big)); }

/* UTF-16 units of one reading starting at from, from + 2, ... below to: its runs. */
static void scan16(ctx *c, int big, Py_ssize_t from, Py_ssize_t to) {
    const unsigned char *a = c->a;
    if (from < c->lo) from += 2;
    Py_ssize_t start = 0, len = 0, forced = -1;
    Py_ssize_t u = from;
    for (; u < to && u + 2 <= c->hi; u += 2) {
        uint32_t v = u16(a, u, big);
        if (v == 0x3C && tag16(c, u, big)) forced = u + 2 * c->reach;
        if (c->t16[v] || u < forced) {
            if (!len) start = u;
            len++;
        } else {
            if (len >= c->m) emit(c, big ? K16BE : K16LE, start, u);
            len = 0;
        }
    }
    if (len >= c->m) emit(c, big ? K16BE : K16LE, start, start + 2 * len);
}

static inline int in32(ctx *c, uint32_t v) { return v <= 0x10FFFF && (c->t32[v >> 3] >> (v & 7) & 1); }

static void scan32(ctx *c, int big, Py_ssize_t from, Py_ssize_t to) {
    const unsigned char *a = c->a;
    Py_ssize_t start = 0, len = 0, forced = -1;
    for (Py_ssize_t p = from; p < to && p + 4 <= c->hi; p += 4) {
        uint32_t v = u32(a, p, big);
        if (v == 0x3C && tag32(c, p, big)) forced = p + 4 * c->reach;
        if (in32(c, v) || p < forced) {
            if (!len) start = p;
            len++;
        } else {
            if (len >= c->m) emit(c, big ? K32BE : K32LE, start, p);
            len = 0;
        }
    }
    if (len >= c->m) emit(c, big ? K32BE : K32LE, start, start + 4 * len);
}

typedef struct {
    Py_ssize_t start, len, forced;
} run_state;

static inline void step(ctx *c, run_state *r, int in, Py_ssize_t at, int kind, int width) {
    if (in) {
        if (!r->len) r->start = at;
        r->len++;
    } else {
        if (r->len >= c->m) emit(c, kind, r->start, r->start + width * r->len);
        r->len = 0;
    }
}

/* Both readings of one residue from position s (a UTF-16 unit's high byte: the BE
 * unit starts there, the LE unit one byte before; a UTF-32 unit's first byte), unit
 * by unit, until neither is in a run; returns where it stopped. A run a reading starts
 * later has its own chain of positions that pass the skip test, and is read from there. */
static Py_ssize_t exact(ctx *c, int width, Py_ssize_t s) {
    const unsigned char *a = c->a;
    run_state be = {0, 0, -1}, le = {0, 0, -1};
    Py_ssize_t q = s;
    if (width == 2) {
        for (; q + 1 <= c->hi; q += 2) {
            int in_be = 0, in_le = 0;
            if (q + 2 <= c->hi) {
                uint32_t v = u16(a, q, 1);
                if (v == 0x3C && tag16(c, q, 1)) be.forced = q + 2 * c->reach;
                in_be = c->t16[v] || q < be.forced;
            }
            step(c, &be, in_be, q, K16BE, 2);
            if (q - 1 >= c->lo) {
                uint32_t v = u16(a, q - 1, 0);
                if (v == 0x3C && tag16(c, q - 1, 0)) le.forced = q - 1 + 2 * c->reach;
                in_le = c->t16[v] || q - 1 < le.forced;
            }
            step(c, &le, in_le, q - 1, K16LE, 2);
            if (!in_be && !in_le) break;
        }
        step(c, &be, 0, 0, K16BE, 2);
        step(c, &le, 0, 0, K16LE, 2);
    } else {
        for (; q + 4 <= c->hi; q += 4) {
            uint32_t v = u32(a, q, 0);
            if (v == 0x3C && tag32(c, q, 0)) le.forced = q + 4 * c->reach;
            int in_le = in32(c, v) || q < le.forced;
            step(c, &le, in_le, q, K32LE, 4);
            v = u32(a, q, 1);
            if (v == 0x3C && tag32(c, q, 1)) be.forced = q + 4 * c->reach;
            int in_be = in32(c, v) || q < be.forced;
            step(c, &be, in_be, q, K32BE, 4);
            if (!in_le && !in_be) break;
        }
        step(c, &le, 0, 0, K32LE, 4);
        step(c, &be, 0, 0, K32BE, 4);
    }
    return q;
}

/* ------------------------------------------------------------------ 64 bytes at a time */

static inline int ctz64(uint64_t x) { return __builtin_ctzll(x); }
static inline uint64_t low(int k) { return k >= 64 ? ~0ULL : ((1ULL << k) - 1); }

/* 128 bits (x0 low word, x1 high word) shifted right by k (0 < k < 64). */
#define SHR128(x0, x1, k, y0, y1) \
    do {                          \
        y0 = (x0 >> (k)) | (x1 << (64 - (k))); \
        y1 = x1 >> (k);           \
    } while (0)

/* Bit i (0..63): positions i, i + stride, ..., i + stride * (n - 1) are all set in the
 * 128 positions (x0, x1). stride * (n - 1) < 64. */
static inline uint64_t chains(uint64_t x0, uint64_t x1, int n, int stride) {
    int l = 1;
    while (2 * l <= n) {
        uint64_t s0, s1;
        SHR128(x0, x1, stride * l, s0, s1);
        x0 &= s0;
        x1 &= s1;
        l *= 2;
    }
    if (l < n) {
        uint64_t s0 = (x0 >> (stride * (n - l))) | (x1 << (64 - stride * (n - l)));
        x0 &= s0;
    }
    return x0;
}

typedef struct {
    uint64_t h, z, lt, valid;
} masks;

/* How 64 bytes become masks: h (byte in the high-byte set), z (NUL), lt ('<'). */
typedef struct {
    unsigned char flags[256]; /* bit 0 h, bit 1 NUL, bit 2 '<': the byte-by-byte way */
    int how;                  /* 0 byte by byte, 1 SSE2 ranges, 2 AVX2 nibble tables */
    unsigned char lut_lo[16], lut_hi[16];
    int nr;
    unsigned char rng[2 * MAX_RANGES];
} classifier;

/* The high-byte set hset (256 bytes, nonzero: in the set) three ways; each may admit
 * more bytes than the set (never fewer): nibble tables of at most 8 row patterns,
 * at most MAX_RANGES ranges. */
static void classify_init(classifier *k, const unsigned char *hset, int how) {
    for (int b = 0; b < 256; b++) k->flags[b] = (unsigned char)((hset[b] ? 1 : 0) | (b == 0) << 1 | (b == 0x3C) << 2);
    k->how = how;
    unsigned rows[16], pats[16];
    int np = 0;
    memset(k->lut_lo, 0, 16);
    memset(k->lut_hi, 0, 16);
    for (int hi = 0; hi < 16; hi++) {
        rows[hi] = 0;
        for (int lo = 0; lo < 16; lo++)
            if (hset[hi << 4 | lo]) rows[hi] |= 1u << lo;
    }
    for (int hi = 0; hi < 16; hi++) {
        if (!rows[hi]) continue;
        int g = 0;
        while (g < np && pats[g] != rows[hi]) g++;
        if (g == np) {
            if (np < 8)
                pats[np++] = rows[hi];
            else
                g = hi % 8, pats[g] |= rows[hi];
        }
        k->lut_hi[hi] |= (unsigned char)(1u << g);
    }
    for (int g = 0; g < np; g++)
        for (int lo = 0; lo < 16; lo++)
            if (pats[g] >> lo & 1) k->lut_lo[lo] |= (unsigned char)(1u << g);
    /* ranges: the set's runs, the closest ones joined until at most MAX_RANGES remain */
    int a[256], b[256], n = 0;
    for (int x = 0; x < 256;) {
        if (!hset[x]) {
            x++;
            continue;
        }
        int y = x;
        while (y + 1 < 256 && hset[y + 1]) y++;
        a[n] = x, b[n] = y, n++;
        x = y + 1;
    }
    while (n > MAX_RANGES) {
        int best = 1;
        for (int i = 2; i < n; i++)
            if (a[i] - b[i - 1] < a[best] - b[best - 1]) best = i;
        b[best - 1] = b[best];
        for (int i = best; i + 1 < n; i++) a[i] = a[i + 1], b[i] = b[i + 1];
        n--;
    }
    k->nr = n;
    for (int i = 0; i < n; i++) k->rng[2 * i] = (unsigned char)a[i], k->rng[2 * i + 1] = (unsigned char)b[i];
}

#if HAVE_SSE2 && defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define HAVE_AVX2 1
__attribute__((target("avx2"))) static void masks_avx2(const unsigned char *p, const classifier *k, uint64_t *h,
                                                       uint64_t *z, uint64_t *lt) {
    const __m256i lut_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)k->lut_lo));
    const __m256i lut_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)k->lut_hi));
    const __m256i nib = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256(), ltv = _mm256_set1_epi8(0x3C);
    uint64_t hh = 0, zz = 0, ll = 0;
    for (int j = 0; j < 2; j++) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(p + 32 * j));
        __m256i t = _mm256_and_si256(_mm256_shuffle_epi8(lut_lo, _mm256_and_si256(x, nib)),
                                     _mm256_shuffle_epi8(lut_hi, _mm256_and_si256(_mm256_srli_epi16(x, 4), nib)));
        hh |= (uint64_t)(uint32_t)~_mm256_movemask_epi8(_mm256_cmpeq_epi8(t, zero)) << (32 * j);
        zz |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, zero)) << (32 * j);
        ll |= (uint64_t)(uint32_t)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, ltv)) << (32 * j);
    }
    *h = hh;
    *z = zz;
    *lt = ll;
}
#else
#define HAVE_AVX2 0
#endif

/* Masks of the 64 bytes at p (n of them inside the range; the rest read as absent). */
static inline void word_masks(const unsigned char *p, int n, const classifier *k, masks *m) {
    unsigned char pad[64];
    if (n <= 0) {
        m->h = m->z = m->lt = m->valid = 0;
        return;
    }
    if (n < 64) {
        memset(pad, 0, sizeof pad);
        memcpy(pad, p, (size_t)n);
        p = pad;
    }
    uint64_t h = 0, z = 0, lt = 0;
#if HAVE_AVX2
    if (k->how == 2) {
        masks_avx2(p, k, &h, &z, &lt);
    } else
#endif
#if HAVE_SSE2
    if (k->how == 1) {
        const __m128i zero = _mm_setzero_si128(), ltv = _mm_set1_epi8(0x3C);
        for (int j = 0; j < 4; j++) {
            __m128i x = _mm_loadu_si128((const __m128i *)(p + 16 * j));
            __m128i in = zero;
            for (int r = 0; r < k->nr; r++) {
                __m128i d = _mm_sub_epi8(x, _mm_set1_epi8((char)k->rng[2 * r]));
                __m128i lim = _mm_set1_epi8((char)(k->rng[2 * r + 1] - k->rng[2 * r]));
                in = _mm_or_si128(in, _mm_cmpeq_epi8(_mm_min_epu8(d, lim), d));
            }
            h |= (uint64_t)(uint16_t)_mm_movemask_epi8(in) << (16 * j);
            z |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, zero)) << (16 * j);
            lt |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(x, ltv)) << (16 * j);
        }
    } else
#endif
    {
        for (int i = 0; i < 64; i++) {
            unsigned f = k->flags[p[i]];
            h |= (uint64_t)(f & 1) << i;
            z |= (uint64_t)((f >> 1) & 1) << i;
            lt |= (uint64_t)((f >> 2) & 1) << i;
        }
    }
    m->valid = low(n);
    m->h = h & m->valid;
    m->z = z & m->valid;
    m->lt = lt & m->valid;
}

/* Bits of the positions w + i with (w + i) % width == cls. */
static inline uint64_t residue(Py_ssize_t w, int width, int cls) {
    static const uint64_t base[5] = {0, 0, 0x5555555555555555ULL, 0, 0x1111111111111111ULL};
    int shift = (int)((((cls - w) % width) + width) % width);
    return base[width] << shift;
}

#define SHR(x, nx, k) (((x) >> (k)) | ((nx) << (64 - (k)))) /* bit i: X[i + k] */
#define SHL(x, px, k) (((x) << (k)) | ((px) >> (64 - (k)))) /* bit i: X[i - k] */

typedef struct {
    uint64_t p16, p32;
} pass;

/* The positions of word w (masks cur, neighbours prev and next) that pass the skip
 * tests, forced stretches included (f16/f32: per residue, the end of the stretch the
 * last '<' unit forces; updated here). */
static void passing(Py_ssize_t w, Py_ssize_t reach, const masks *prev, const masks *cur, const masks *next, Py_ssize_t *f16,
                    Py_ssize_t *f32, pass *out) {
    uint64_t valid = cur->valid;
    uint64_t nz = ~cur->z & valid, nzp = ~prev->z & prev->valid, nzn = ~next->z & next->valid;
    uint64_t p16 = cur->h & (SHL(nz, nzp, 1) | nz | SHR(nz, nzn, 1));
    uint64_t p32 = 0;
    if (cur->z | next->z) {
        uint64_t ltu = cur->z & (SHL(cur->lt, prev->lt, 1) | SHR(cur->lt, next->lt, 1));
        while (ltu) {
            int i = ctz64(ltu);
            int cls = (int)((w + i) & 1);
            if (w + i + 2 * reach > f16[cls]) f16[cls] = w + i + 2 * reach;
            ltu &= ltu - 1;
        }
        uint64_t z = cur->z, zn = next->z;
        uint64_t z1 = SHR(z, zn, 1), z2 = SHR(z, zn, 2), z3 = SHR(z, zn, 3);
        uint64_t n1 = SHR(nz, nzn, 1), n2 = SHR(nz, nzn, 2), n3 = SHR(nz, nzn, 3);
        p32 = (z3 & (nz | n1 | n2)) | (z & (n1 | n2 | n3));
        uint64_t l32 = (cur->lt & z1 & z2 & z3) | (z & z1 & z2 & SHR(cur->lt, next->lt, 3));
        while (l32) {
            int i = ctz64(l32);
            int cls = (int)((w + i) & 3);
            if (w + i + 4 * reach > f32[cls]) f32[cls] = w + i + 4 * reach;
            l32 &= l32 - 1;
        }
    }
    for (int cls = 0; cls < 2; cls++)
        if (f16[cls] > w) p16 |= low((int)(f16[cls] - w < 64 ? f16[cls] - w : 64)) & residue(w, 2, cls);
    for (int cls = 0; cls < 4; cls++)
        if (f32[cls] > w) p32 |= low((int)(f32[cls] - w < 64 ? f32[cls] - w : 64)) & residue(w, 4, cls);
    out->p16 = p16 & valid;
    out->p32 = p32 & valid;
}

#if HAVE_AVX2
/* The fast stretch of scan_all (AVX2): from word j (its positions passing the tests:
 * p1, none of UTF-32; h2: the high-byte mask of word j + 1; words j and j + 1 hold no
 * NUL, and no '<' unit forces anything at or after word j), while word j + 2 holds no
 * NUL either, the positions of word j + 1 that pass are exactly its high-byte mask
 * (every unit around them is not 0x0000, no UTF-32 unit can be in the table, no '<'
 * unit is forced) and nothing passes for UTF-32; so where no chain of n16 passing
 * positions starts in word j, word j holds no run start and the next word is read.
 * Returns the first word (absolute offset) where that is not shown, with its passing
 * positions in *p1 (UTF-16; none for UTF-32). Reads whole words below hi only. */
__attribute__((target("avx2"))) static Py_ssize_t skip_plain_avx2(const unsigned char *a, Py_ssize_t w, Py_ssize_t hi,
                                                                  const classifier *k, int n16, uint64_t *p1,
                                                                  uint64_t h2) {
    const __m256i lut_lo = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)k->lut_lo));
    const __m256i lut_hi = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)k->lut_hi));
    const __m256i nib = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
    uint64_t h1 = *p1;
    for (; w + 192 <= hi; w += 64) {
        const unsigned char *p = a + w + 128;
        __m256i x0 = _mm256_loadu_si256((const __m256i *)p), x1 = _mm256_loadu_si256((const __m256i *)(p + 32));
        __m256i nul = _mm256_or_si256(_mm256_cmpeq_epi8(x0, zero), _mm256_cmpeq_epi8(x1, zero));
        if (!_mm256_testz_si256(nul, nul)) break;
        if (chains(h1, h2, n16, 2)) break;
        __m256i t0 = _mm256_and_si256(_mm256_shuffle_epi8(lut_lo, _mm256_and_si256(x0, nib)),
                                      _mm256_shuffle_epi8(lut_hi, _mm256_and_si256(_mm256_srli_epi16(x0, 4), nib)));
        __m256i t1 = _mm256_and_si256(_mm256_shuffle_epi8(lut_lo, _mm256_and_si256(x1, nib)),
                                      _mm256_shuffle_epi8(lut_hi, _mm256_and_si256(_mm256_srli_epi16(x1, 4), nib)));
        uint64_t h3 = (uint64_t)(uint32_t)~_mm256_movemask_epi8(_mm256_cmpeq_epi8(t0, zero)) |
                      (uint64_t)(uint32_t)~_mm256_movemask_epi8(_mm256_cmpeq_epi8(t1, zero)) << 32;
        h1 = h2;
        h2 = h3;
    }
    *p1 = h1;
    return w;
}

/* The other fast stretch (AVX2): from word w, itself and the next all NUL bytes, with
 * nothing passing in w and no '<' unit forcing anything at or after it, while word
 * w + 2 is all NUL bytes too, nothing passes in word w + 1 either (each of its units,
 * UTF-16 or UTF-32, is 0x0000 with only NULs around it, and none is a '<'), so no
 * chain starts in word w. Returns the first word (absolute offset) where that is not
 * shown; nothing passes there. Reads whole words below hi only. */
__attribute__((target("avx2"))) static Py_ssize_t skip_nul_avx2(const unsigned char *a, Py_ssize_t w, Py_ssize_t hi) {
    for (; w + 192 <= hi; w += 64) {
        const unsigned char *p = a + w + 128;
        __m256i x = _mm256_or_si256(_mm256_loadu_si256((const __m256i *)p), _mm256_loadu_si256((const __m256i *)(p + 32)));
        if (!_mm256_testz_si256(x, x)) break;
    }
    return w;
}
#endif

static void scan_all(ctx *c, const classifier *cl) {
#define MASKS(p, n, out) word_masks(p, n, cl, out)
    Py_ssize_t lo = c->lo, hi = c->hi;
    Py_ssize_t nw = (hi - lo + 63) / 64;
    /* a run of m units covers m passing positions of one residue; chains longer than fit
     * in the 64 bits after a position are looked for as chains of that length */
    int n16 = (int)(c->m < 32 ? c->m : 32), n32 = (int)(c->m < 16 ? c->m : 16);
    Py_ssize_t f16[2] = {-1, -1}, f32[4] = {-1, -1, -1, -1};
    Py_ssize_t done16[2] = {0, 0}, done32[4] = {0, 0, 0, 0};
    masks m0 = {0, 0, 0, 0}, m1, m2, m3; /* words k-1, k, k+1, k+2 */
    pass p1, p2;                         /* words k, k+1 */
    MASKS(c->a + lo, (int)(hi - lo < 64 ? hi - lo : 64), &m1);
    MASKS(c->a + lo + 64, (int)(hi - lo - 64 < 64 ? hi - lo - 64 : 64), &m2);
    passing(lo, c->reach, &m0, &m1, &m2, f16, f32, &p1);
    for (Py_ssize_t k = 0; k < nw && !c->err; k++) {
        Py_ssize_t w = lo + 64 * k;
#if HAVE_AVX2
        if (cl->how == 2 && !(m1.z | m2.z | p1.p32) && f16[0] <= w && f16[1] <= w && f32[0] <= w && f32[1] <= w &&
            f32[2] <= w && f32[3] <= w) {
            Py_ssize_t to = skip_plain_avx2(c->a, w, hi, cl, n16, &p1.p16, m2.h);
            if (to > w) { /* words k .. up to `to` hold no run start; word `to` and the next are read again */
                k = (to - lo) / 64;
                w = to;
                MASKS(c->a + w, 64, &m1);
                MASKS(c->a + w + 64, (int)(hi - w - 64 < 64 ? hi - w - 64 : 64), &m2);
                p1.p32 = 0;
            }
        } else if (cl->how == 2 && m1.z == ~0ULL && m2.z == ~0ULL && !(p1.p16 | p1.p32) && f16[0] <= w && f16[1] <= w &&
                   f32[0] <= w && f32[1] <= w && f32[2] <= w && f32[3] <= w) {
            Py_ssize_t to = skip_nul_avx2(c->a, w, hi);
            if (to > w) { /* words k .. up to `to` hold no run start; word `to` and the next are read again */
                k = (to - lo) / 64;
                w = to;
                MASKS(c->a + w, 64, &m1);
                MASKS(c->a + w + 64, (int)(hi - w - 64 < 64 ? hi - w - 64 : 64), &m2);
            }
        }
#endif
        Py_ssize_t w3 = w + 128;
        MASKS(c->a + w3, (int)(hi - w3 < 64 ? hi - w3 : 64), &m3);
        passing(w + 64, c->reach, &m1, &m2, &m3, f16, f32, &p2);
        uint64_t r = chains(p1.p16, p2.p16, n16, 2);
        while (r) {
            int i = ctz64(r);
            Py_ssize_t q = w + i;
            int cls = (int)(q & 1);
            if (q >= done16[cls]) done16[cls] = exact(c, 2, q);
            r &= r - 1;
        }
        if (p1.p32 | p2.p32) {
            r = chains(p1.p32, p2.p32, n32, 4);
            while (r) {
                int i = ctz64(r);
                Py_ssize_t q = w + i;
                int cls = (int)(q & 3);
                if (q >= done32[cls]) done32[cls] = exact(c, 4, q);
                r &= r - 1;
            }
        }
        m1 = m2;
        m2 = m3;
        p1 = p2;
    }
#undef MASKS
}

/* A unit-by-unit reading of every unit (no skipping): the reference the tests hold the
 * skipping pass to. */
static void scan_plain(ctx *c) {
    for (int al = 0; al < 2; al++) {
        scan16(c, 0, c->lo + al, c->hi);
        scan16(c, 1, c->lo + al, c->hi);
    }
    for (int al = 0; al < 4; al++) {
        scan32(c, 0, c->lo + al, c->hi);
        scan32(c, 1, c->lo + al, c->hi);
    }
}

PyDoc_STRVAR(runs_doc,
"runs(buf, lo, hi, t16, t32, hset, fold, spell, spellings, min_len, reach, mode=0)\n"
"    -> (runs, text)\n\n"
"The runs of at least min_len units of every UTF-16/32 reading of buf[lo:hi] (module\n"
"comment). t16: 65536 bytes, nonzero where a UTF-16 code unit is in the alphabet;\n"
"t32: a bitset (0x110000 bits) of the code points in it; hset: 256 bytes, nonzero for\n"
"every high byte of a unit t16 admits (and any others); fold: a bitset of code points\n"
"(characters that fold to several); spell: a bitset of the characters that may spell a\n"
"character of a secret (ASCII letters and digits among them); a run whose characters\n"
"spell fewer than `spellings` (fold characters count 3) is left out. runs: int64\n"
"septuples (kind, start, end, utf8\n"
"offset, char offset, chars, holds a fold character) per run, kind 0 utf-16-le, 1\n"
"utf-16-be, 2 utf-32-le, 3 utf-32-be, offsets absolute in buf. text: every run's text\n"
"in UTF-8 (as Python decodes it with errors='replace'), each followed by a NUL.\n"
"mode: 0 skipping (the fastest masks this CPU has), 1 byte-by-byte masks, 2 every\n"
"unit read (no skipping), 3 SSE2 masks.");

static PyObject *runs(PyObject *self, PyObject *args) {
    PyObject *obj;
    Py_ssize_t lo, hi, m, reach;
    Py_buffer t16, t32, hset, fold, spell;
    Py_ssize_t spellings;
    int mode = 0;
    if (!PyArg_ParseTuple(args, "Onny*y*y*y*y*nnn|i", &obj, &lo, &hi, &t16, &t32, &hset, &fold, &spell, &spellings,
                          &m, &reach, &mode))
        return NULL;
    Py_buffer view;
    PyObject *result = NULL;
    if (PyObject_GetBuffer(obj, &view, PyBUF_SIMPLE) < 0) goto done;
    if (lo < 0 || hi > view.len || lo > hi || m < 1 || reach < 1 || t16.len != 65536 ||
        t32.len != 0x110000 / 8 || hset.len != 256 || fold.len != 0x110000 / 8 || spell.len != 0x110000 / 8 || mode < 0 || mode > 3) {
        PyErr_SetString(PyExc_ValueError, "runs: bad range, min_len, reach or table size");
        PyBuffer_Release(&view);
        goto done;
    }
    ctx c;
    memset(&c, 0, sizeof c);
    c.a = (const unsigned char *)view.buf;
    c.lo = lo;
    c.hi = hi;
    c.t16 = (const unsigned char *)t16.buf;
    c.t32 = (const unsigned char *)t32.buf;
    c.fold = (const unsigned char *)fold.buf;
    c.spell = (const unsigned char *)spell.buf;
    c.spellings = spellings;
    c.m = m;
    c.reach = reach;
    classifier k;
    classify_init(&k, (const unsigned char *)hset.buf,
                  mode == 1 ? 0 : mode == 3 ? (HAVE_SSE2 ? 1 : 0) : best_how);
    Py_BEGIN_ALLOW_THREADS
    if (hi > lo) {
        if (mode == 2)
            scan_plain(&c);
        else
            scan_all(&c, &k);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&view);
    if (c.err) {
        PyErr_NoMemory();
    } else {
        PyObject *r = PyBytes_FromStringAndSize((const char *)c.runs.v, c.runs.n * (Py_ssize_t)sizeof(int64_t));
        PyObject *t = r ? PyBytes_FromStringAndSize((const char *)c.out.p, c.out.n) : NULL;
        if (r && t)
            result = Py_BuildValue("(NN)", r, t);
        else {
            Py_XDECREF(r);
            Py_XDECREF(t);
        }
    }
    PyMem_RawFree(c.runs.v);
    PyMem_RawFree(c.out.p);
done:
    PyBuffer_Release(&t16);
    PyBuffer_Release(&t32);
    PyBuffer_Release(&hset);
    PyBuffer_Release(&fold);
    PyBuffer_Release(&spell);
    return result;
}

static PyMethodDef methods[] = {
    {"runs", runs, METH_VARARGS, runs_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "memkit.scan._wide",
    "Where bytes can hold UTF-16 or UTF-32 text, for memkit's wide readings (see memkit/scan/encodings.py).", -1,
    methods,
};

PyMODINIT_FUNC PyInit__wide(void) {
#if HAVE_AVX2
    __builtin_cpu_init();
    best_how = __builtin_cpu_supports("avx2") ? 2 : 1;
#else
    best_how = HAVE_SSE2 ? 1 : 0;
#endif
    PyObject *m = PyModule_Create(&module);
    static const char *names[] = {"bytes", "sse2", "avx2"};
    if (m && (PyModule_AddIntConstant(m, "ABI", WIDE_ABI) < 0 ||
              PyModule_AddStringConstant(m, "MASKS", names[best_how]) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
