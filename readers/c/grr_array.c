/* grr: array references, the bytes they point at, and widened leaves ("Arrays", "Trees"). */
#include "grr_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#define CHUNK (1u << 20)

int bin_open(bin_t *f) {
    if (f->fd >= 0) return 0;
    if (grr_open_regular(f->r, f->bin, &f->fd, &f->file_size) < 0) return -1;
    if (f->bin_size >= 0 && f->file_size != (uint64_t)f->bin_size)
        return grr_fail(f->r, "%s: file has %llu bytes, the manifest says %lld", f->bin,
                        (unsigned long long)f->file_size, (long long)f->bin_size);
    return 0;
}

void bin_close(bin_t *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
}

int is_ref(json_t *o) {
    return json_is_object(o) &&
           json_is_string(json_object_get(o, "__type")) &&
           !strcmp(json_string_value(json_object_get(o, "__type")), "ndarray");
}

/* Checks an array reference against everything but the file (see "Arrays"). */
int parse_ref(grr_reader *r, json_t *o, const char *where, int aligned, const char *file,
                     ref_t *ref) {
    json_t *order = json_object_get(o, "order");
    if (order && (!json_is_string(order) || strcmp(json_string_value(order), "C")))
        return grr_fail(r, "%s: only C order is supported", where);
    const char *name = grr_string(json_object_get(o, "npyfile"));
    if (!name || !grr_plain_name(name))
        return grr_fail(r, "%s: npyfile is not a plain file name in the directory", where);
    if (file && strcmp(name, file))
        return grr_fail(r, "%s: npyfile '%s' is not this batch's '%s'", where, name, file);
    const char *dt = grr_string(json_object_get(o, "dtype"));
    if (!dt || grr_parse_dtype(dt, &ref->dtype) < 0)
        return grr_fail(r, "%s: unsupported dtype", where);
    json_t *shape = json_object_get(o, "shape");
    if (!json_is_array(shape) || json_array_size(shape) > GRR_MAX_NDIM)
        return grr_fail(r, "%s: shape must be a list of at most %d integers", where,
                        GRR_MAX_NDIM);
    ref->ndim = (int)json_array_size(shape);
    uint64_t nonzero = 1, count = 1;
    for (int i = 0; i < ref->ndim; i++) {
        json_t *d = json_array_get(shape, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 ||
            (uint64_t)json_integer_value(d) > GRR_MAX_DIM)
            return grr_fail(r, "%s: every dimension must be an integer in [0, 2^48]", where);
        uint64_t dim = (uint64_t)json_integer_value(d);
        ref->shape[i] = dim;
        if (dim == 0) count = 0;
        else if (nonzero <= GRR_MAX_DIM)
            nonzero = dim > GRR_MAX_DIM / nonzero ? GRR_MAX_DIM + 1 : nonzero * dim;
    }
    if (nonzero > GRR_MAX_DIM || nonzero > GRR_MAX_DIM / ref->dtype.itemsize) /* no wrap */
        return grr_fail(r, "%s: shape of %s has too many elements", where, ref->dtype.str);
    if (count) count = nonzero;
    int64_t off, size;
    if (!grr_get_int(o, "npyoff", &off) || off < 0)
        return grr_fail(r, "%s: npyoff must be an integer >= 0", where);
    if (aligned && off % GRR_ALIGNMENT)
        return grr_fail(r, "%s: npyoff %lld is not a multiple of %d", where, (long long)off,
                        GRR_ALIGNMENT);
    if (!grr_get_int(o, "size", &size) || size < 0)
        return grr_fail(r, "%s: size must be an integer >= 0", where);
    if ((uint64_t)size != count * ref->dtype.itemsize)
        return grr_fail(r, "%s: size %lld does not match the shape of %s", where,
                        (long long)size, ref->dtype.str);
    json_t *crc = json_object_get(o, "crc32");
    ref->has_crc = crc && !json_is_null(crc);
    if (ref->has_crc) {
        if (!json_is_integer(crc) || json_integer_value(crc) < 0 ||
            json_integer_value(crc) > 0xFFFFFFFFll)
            return grr_fail(r, "%s: crc32 must be an integer in [0, 2^32)", where);
        ref->crc = (uint32_t)json_integer_value(crc);
    }
    ref->offset = (uint64_t)off;
    ref->size = (uint64_t)size;
    ref->stored = (uint64_t)size;
    ref->coded = 0;
    json_t *codec = json_object_get(o, "codec");
    if (codec && !json_is_null(codec)) {
        const char *cname = grr_string(json_object_get(codec, "name"));
        json_t *conf = json_object_get(codec, "configuration");
        if (!cname || !json_is_object(conf))
            return grr_fail(r, "%s: 'codec' must be {'name': ..., 'configuration': {...}}", where);
        if (strcmp(cname, "zstd"))
            return grr_fail(r, "%s: unknown codec '%s' (this reader knows zstd)", where, cname);
        int64_t rows, stored;
        if (!grr_get_int(conf, "chunk_rows", &rows) || rows < 1 || rows > GRR_MAX_CHUNK_ROWS)
            return grr_fail(r, "%s: codec chunk_rows must be an integer in [1, %d]", where,
                            GRR_MAX_CHUNK_ROWS);
        const char *delta = grr_string(json_object_get(conf, "delta"));
        if (!delta || (strcmp(delta, "none") && strcmp(delta, "xor") && strcmp(delta, "sub")))
            return grr_fail(r, "%s: codec delta must be 'none', 'xor' or 'sub'", where);
        if (!grr_get_int(o, "stored", &stored) || stored < 8)
            return grr_fail(r, "%s: stored must be an integer >= 8", where);
        if (ref->ndim < 1 || !ref->has_crc)
            return grr_fail(r, "%s: a compressed array needs rows and a crc32", where);
        /* No zstd frame decodes to more than 32768 times its size: refuse before allocating. */
        if (ref->size / GRR_MAX_ZSTD_RATIO > (uint64_t)stored)
            return grr_fail(r, "%s: %lld stored bytes cannot decode to %lld bytes", where,
                            (long long)stored, (long long)size);
        ref->coded = 1;
        ref->stored = (uint64_t)stored;
        ref->chunk_rows = (uint64_t)rows;
        ref->delta = !strcmp(delta, "none") ? 0 : !strcmp(delta, "xor") ? 1 : 2;
    }
    return 0;
}

/* Checks bytes read for an array: <U holds code points only. */
int check_codes(grr_reader *r, const ref_t *ref, const unsigned char *p, uint64_t n,
                       const char *where) {
    if (ref->dtype.kind != 'U') return 0;
    for (uint64_t i = 0; i + 4 <= n; i += 4) {
        uint32_t c = ref->dtype.order == '>'
                         ? (uint32_t)p[i] << 24 | (uint32_t)p[i + 1] << 16 | p[i + 2] << 8 | p[i + 3]
                         : (uint32_t)p[i + 3] << 24 | (uint32_t)p[i + 2] << 16 | p[i + 1] << 8 | p[i];
        if (c > GRR_MAX_CODE_POINT)
            return grr_fail(r, "%s: %s array holds values that are not Unicode code points",
                            where, ref->dtype.str);
    }
    return 0;
}

int check_bounds(bin_t *f, const ref_t *ref, const char *where, const char *name) {
    if (ref->offset > f->file_size || ref->stored > f->file_size - ref->offset)
        return grr_fail(f->r, "%s: bytes %llu..%llu lie outside %s (%llu bytes)", where,
                        (unsigned long long)ref->offset,
                        (unsigned long long)(ref->offset + ref->stored), name,
                        (unsigned long long)f->file_size);
    return 0;
}

/* Reads an array's bytes into dest (or only checks them, dest NULL), checking its CRC-32 when
 * verifying and its code points. */
/* A compressed array: the stored bytes read whole (bounded by the file), the CRC-32 checked
 * when verifying, the chunk table checked, each chunk's frame size checked against its rows
 * before decoding, the delta undone (see "Compressed arrays"). dest NULL: checks only. */
static int read_coded(bin_t *f, const ref_t *ref, const char *where, const char *name,
                      unsigned char *dest) {
    uint64_t rows = ref->shape[0], row_bytes = rows ? ref->size / rows : 0;
    uint64_t n = (rows + ref->chunk_rows - 1) / ref->chunk_rows, tbytes = 8 * (n + 1);
    if (n + 1 > ref->stored / 8 || tbytes > ref->stored)
        return grr_fail(f->r, "%s: %llu stored bytes cannot hold the chunk table", where,
                        (unsigned long long)ref->stored);
    if (row_bytes && ref->chunk_rows > GRR_MAX_CHUNK_BYTES / row_bytes)
        return grr_fail(f->r, "%s: chunks of %llu rows are too large", where,
                        (unsigned long long)ref->chunk_rows);
    unsigned char *blob = malloc(ref->stored);
    unsigned char *tmp = dest ? NULL : malloc(ref->chunk_rows * row_bytes + 1);
    if (!blob || (!dest && !tmp)) {
        free(blob);
        free(tmp);
        return grr_fail(f->r, "%s: out of memory", where);
    }
    int rc = grr_pread_all(f->r, f->fd, name, ref->offset, blob, ref->stored);
    if (rc == 0 && f->r->verify && grr_crc32(0, blob, ref->stored) != ref->crc)
        rc = grr_fail(f->r, "%s: CRC-32 of the array's stored bytes does not match", where);
    uint64_t prev = tbytes;
    for (uint64_t c = 0; c <= n && rc == 0; c++) {
        uint64_t v = 0;
        for (int k = 7; k >= 0; k--) v = v << 8 | blob[8 * c + (uint64_t)k];
        if ((c == 0 && v != tbytes) || (c == n && v != ref->stored) || (c > 0 && v <= prev) ||
            v > ref->stored)
            rc = grr_fail(f->r, "%s: chunk offsets must ascend strictly from %llu to %llu",
                          where, (unsigned long long)tbytes, (unsigned long long)ref->stored);
        if (c > 0 && rc == 0) {
            uint64_t a = prev, b = v, r0 = (c - 1) * ref->chunk_rows;
            uint64_t cr = rows - r0 < ref->chunk_rows ? rows - r0 : ref->chunk_rows;
            uint64_t want = cr * row_bytes;
            unsigned long long declared = ZSTD_getFrameContentSize(blob + a, (size_t)(b - a));
            unsigned char *out = dest ? dest + r0 * row_bytes : tmp;
            if (want / GRR_MAX_ZSTD_RATIO > b - a || declared != want) {
                rc = grr_fail(f->r, "%s: chunk %llu declares %lld bytes, expected %llu", where,
                              (unsigned long long)(c - 1), (long long)declared,
                              (unsigned long long)want);
            } else {
                size_t got = ZSTD_decompress(out, (size_t)want, blob + a, (size_t)(b - a));
                if (ZSTD_isError(got) || got != want)
                    rc = grr_fail(f->r, "%s: chunk %llu does not decode to %llu bytes (%s)",
                                  where, (unsigned long long)(c - 1), (unsigned long long)want,
                                  ZSTD_isError(got) ? ZSTD_getErrorName(got) : "size");
                for (uint64_t j = 1; rc == 0 && ref->delta && j < cr; j++) {
                    unsigned char *row = out + j * row_bytes, *up = row - row_bytes;
                    if (ref->delta == 1)
                        for (uint64_t i = 0; i < row_bytes; i++) row[i] ^= up[i];
                    else
                        for (uint64_t i = 0; i < row_bytes; i++) row[i] += up[i];
                }
                if (rc == 0) rc = check_codes(f->r, ref, out, want, where);
            }
        }
        prev = v;
    }
    free(blob);
    free(tmp);
    return rc;
}

int read_ref(bin_t *f, const ref_t *ref, const char *where, const char *name,
                    unsigned char *dest) {
    if (check_bounds(f, ref, where, name) < 0) return -1;
    if (ref->coded) return read_coded(f, ref, where, name, dest);
    unsigned char *chunk = dest ? NULL : malloc(CHUNK);
    if (!dest && !chunk) return grr_fail(f->r, "%s: out of memory", where);
    uint32_t crc = 0;
    int rc = 0;
    for (uint64_t done = 0; done < ref->size && rc == 0;) {
        uint64_t n = ref->size - done;
        if (!dest && n > CHUNK) n = CHUNK;
        unsigned char *p = dest ? dest + done : chunk;
        rc = grr_pread_all(f->r, f->fd, name, ref->offset + done, p, n);
        if (rc == 0) rc = check_codes(f->r, ref, p, n, where);
        if (rc == 0) crc = grr_crc32(crc, p, n);
        done += n;
    }
    free(chunk);
    if (rc == 0 && f->r->verify && ref->has_crc && crc != ref->crc)
        return grr_fail(f->r, "%s: CRC-32 of the array's bytes does not match", where);
    return rc;
}


/* ---- widened leaves: numpy's result_type of the parts' dtypes, and the conversion -------- */

static int float_size_for_int(size_t n) { return n == 1 ? 2 : n == 2 ? 4 : 8; }

/* numpy's np.result_type(a, b) for the kinds b, i, u, f (and U with U, S with S); -1 for mixes
 * the format refuses, and for complex and half/long double results this reader leaves out. */
int result_dtype(const grr_dtype *a, const grr_dtype *b, grr_dtype *out) {
    char text[16];
    if (!strcmp(a->str, b->str)) {
        *out = *a;
        return 0;
    }
    if (strchr("US", a->kind) || strchr("US", b->kind)) {
        if (a->kind != b->kind) return -1;
        size_t chars = (a->itemsize > b->itemsize ? a->itemsize : b->itemsize) /
                       (a->kind == 'U' ? 4 : 1);
        snprintf(text, sizeof text, "<%c%zu", a->kind, chars);
        return grr_parse_dtype(text, out);
    }
    if (!strchr("biuf", a->kind) || !strchr("biuf", b->kind)) return -1;
    if ((a->kind == 'f' && (a->itemsize == 2 || a->itemsize > 8)) ||
        (b->kind == 'f' && (b->itemsize == 2 || b->itemsize > 8)))
        return -1;
    char kind;
    size_t size;
    if (a->kind == 'b' || b->kind == 'b') {
        const grr_dtype *o = a->kind == 'b' ? b : a;
        kind = o->kind;
        size = o->itemsize;
    } else if (a->kind == b->kind) {
        kind = a->kind;
        size = a->itemsize > b->itemsize ? a->itemsize : b->itemsize;
    } else if (a->kind == 'f' || b->kind == 'f') {
        const grr_dtype *f = a->kind == 'f' ? a : b, *n = a->kind == 'f' ? b : a;
        kind = 'f';
        size = (size_t)float_size_for_int(n->itemsize);
        if (f->itemsize > size) size = f->itemsize;
    } else {
        const grr_dtype *i = a->kind == 'i' ? a : b, *u = a->kind == 'i' ? b : a;
        if (i->itemsize > u->itemsize) {
            kind = 'i';
            size = i->itemsize;
        } else if (u->itemsize < 8) {
            kind = 'i';
            size = 2 * u->itemsize;
        } else {
            kind = 'f';
            size = 8;
        }
    }
    if (kind == 'f' && size == 2) return -1;
    snprintf(text, sizeof text, "<%c%zu", kind, size);
    return grr_parse_dtype(text, out);
}

/* Converts n elements from one dtype to a wider one (as numpy's astype does for these).
 * Returns -1 (having converted the rest) when an integer did not convert exactly: 64-bit
 * integers beyond 2**53 joined with a float part, which the format forbids a reader to round. */
int convert(const grr_dtype *from, const unsigned char *src, const grr_dtype *to,
            unsigned char *dst, uint64_t n) {
    int exact = 1;
    size_t fs = from->itemsize, ts = to->itemsize;
    if (strchr("US", to->kind)) {
        for (uint64_t i = 0; i < n; i++) {
            memset(dst + i * ts, 0, ts);
            if (from->order == '>' && to->kind == 'U') {
                for (size_t k = 0; k < fs; k += 4)
                    for (int j = 0; j < 4; j++) dst[i * ts + k + (size_t)j] = src[i * fs + k + 3 - (size_t)j];
            } else {
                memcpy(dst + i * ts, src + i * fs, fs);
            }
        }
        return 0;
    }
    for (uint64_t i = 0; i < n; i++) {
        unsigned char b[8] = {0};
        for (size_t k = 0; k < fs; k++) b[k] = src[i * fs + (from->order == '>' ? fs - 1 - k : k)];
        uint64_t u = 0;
        for (size_t k = 0; k < fs; k++) u |= (uint64_t)b[k] << (8 * k);
        double d = 0;
        int64_t si = 0;
        if (from->kind == 'f') {
            if (fs == 4) {
                float f;
                uint32_t u32 = (uint32_t)u;
                memcpy(&f, &u32, 4);
                d = f;
            } else {
                memcpy(&d, &u, 8);
            }
        } else if (from->kind == 'i') {
            si = fs < 8 && (u >> (8 * fs - 1)) & 1 ? (int64_t)(u | (~0ull << (8 * fs))) : (int64_t)u;
            d = (double)si;
        } else {
            si = (int64_t)u;
            d = (double)u;
        }
        unsigned char *out = dst + i * ts;
        if (to->kind == 'f' && ts == 4) {
            float f = (float)d;
            memcpy(out, &f, 4);
            if (from->kind != 'f' && (double)f != d) exact = 0;
        } else if (to->kind == 'f') {
            memcpy(out, &d, 8);
        } else {
            uint64_t v = (uint64_t)si;
            for (size_t k = 0; k < ts; k++) out[k] = (unsigned char)(v >> (8 * k));
        }
        /* d is an integer here; 2**63 and 2**64 are exact doubles, outside the int ranges. */
        if (to->kind == 'f' && from->kind == 'i' &&
            !(d >= -9223372036854775808.0 && d < 9223372036854775808.0 && (int64_t)d == si))
            exact = 0;
        if (to->kind == 'f' && from->kind == 'u' &&
            !(d < 18446744073709551616.0 && (uint64_t)d == u))
            exact = 0;
    }
    return exact ? 0 : -1;
}

