/* grr: an episode from its entries ("Batch", "Arrays", "Values", "Infos", "Version history"). */
#include "grr_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CODE_POINT 0x10FFFFu
#define CHUNK (1u << 20)

typedef struct {
    grr_dtype dtype;
    int ndim;
    uint64_t shape[GRR_MAX_NDIM];
    uint64_t offset, size;
    int has_crc;
    uint32_t crc;
} ref_t;

/* The .bin file of one entry's batch, opened on first use. */
typedef struct {
    grr_reader *r;
    const char *bin;          /* file name; NULL: legacy (each reference names its file) */
    int64_t bin_size;
    int fd;
    uint64_t file_size;
} bin_t;

static int bin_open(bin_t *f) {
    if (f->fd >= 0) return 0;
    if (grr_open_regular(f->r, f->bin, &f->fd, &f->file_size) < 0) return -1;
    if (f->bin_size >= 0 && f->file_size != (uint64_t)f->bin_size)
        return grr_fail(f->r, "%s: file has %llu bytes, the manifest says %lld", f->bin,
                        (unsigned long long)f->file_size, (long long)f->bin_size);
    return 0;
}

static void bin_close(bin_t *f) {
    if (f->fd >= 0) close(f->fd);
    f->fd = -1;
}

static int is_ref(json_t *o) {
    return json_is_object(o) &&
           json_is_string(json_object_get(o, "__type")) &&
           !strcmp(json_string_value(json_object_get(o, "__type")), "ndarray");
}

/* Checks an array reference against everything but the file (see "Arrays"). */
static int parse_ref(grr_reader *r, json_t *o, const char *where, int aligned, const char *file,
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
    if (nonzero > GRR_MAX_DIM || nonzero * ref->dtype.itemsize > GRR_MAX_DIM)
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
    return 0;
}

/* Checks bytes read for an array: <U holds code points only. */
static int check_codes(grr_reader *r, const ref_t *ref, const unsigned char *p, uint64_t n,
                       const char *where) {
    if (ref->dtype.kind != 'U') return 0;
    for (uint64_t i = 0; i + 4 <= n; i += 4) {
        uint32_t c = ref->dtype.order == '>'
                         ? (uint32_t)p[i] << 24 | (uint32_t)p[i + 1] << 16 | p[i + 2] << 8 | p[i + 3]
                         : (uint32_t)p[i + 3] << 24 | (uint32_t)p[i + 2] << 16 | p[i + 1] << 8 | p[i];
        if (c > MAX_CODE_POINT)
            return grr_fail(r, "%s: %s array holds values that are not Unicode code points",
                            where, ref->dtype.str);
    }
    return 0;
}

static int check_bounds(bin_t *f, const ref_t *ref, const char *where, const char *name) {
    if (ref->offset > f->file_size || ref->size > f->file_size - ref->offset)
        return grr_fail(f->r, "%s: bytes %llu..%llu lie outside %s (%llu bytes)", where,
                        (unsigned long long)ref->offset,
                        (unsigned long long)(ref->offset + ref->size), name,
                        (unsigned long long)f->file_size);
    return 0;
}

/* Reads an array's bytes into dest (or only checks them, dest NULL), checking its CRC-32 when
 * verifying and its code points. */
static int read_ref(bin_t *f, const ref_t *ref, const char *where, const char *name,
                    unsigned char *dest) {
    if (check_bounds(f, ref, where, name) < 0) return -1;
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

/* ---- VALUEs ---------------------------------------------------------------------------- */

static int json_float(grr_reader *r, json_t *v, const char *where, double *x) {
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (strcmp(s, "nan") && strcmp(s, "inf") && strcmp(s, "-inf"))
            return grr_fail(r, "%s: bad float '%s'", where, s);
        *x = 0;
        return 0;
    }
    if (!json_is_number(v)) return grr_fail(r, "%s: expected a number", where);
    *x = json_number_value(v);
    return 0;
}

static int base64_ok(const char *s) {
    size_t data = 0, pad = 0;
    for (; *s; s++) {
        char c = *s;
        int alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '+' || c == '/';
        if (alpha && !pad) data++;
        else if (c == '=' && pad < 2) pad++;
        else return 0;
    }
    switch (data % 4) {
    case 0: return 1;
    case 2: return pad == 2;
    case 3: return pad >= 1;
    default: return 0;
    }
}

static int check_value(bin_t *f, json_t *v, const char *where, int depth, int *hashable);

static int check_scalar(bin_t *f, json_t *o, const char *where, int depth) {
    grr_reader *r = f->r;
    grr_dtype dt;
    const char *dts = grr_string(json_object_get(o, "dtype"));
    if (!dts || grr_parse_dtype(dts, &dt) < 0) return grr_fail(r, "%s: unsupported dtype", where);
    json_t *v = json_object_get(o, "value");
    if (json_is_object(v)) {
        ref_t ref;
        if (!is_ref(v)) return grr_fail(r, "%s: scalar array does not match dtype", where);
        if (depth + 1 > GRR_MAX_NESTING) return grr_fail(r, "%s: nested too deeply", where);
        if (parse_ref(r, v, where, 1, f->bin, &ref) < 0 || bin_open(f) < 0 ||
            read_ref(f, &ref, where, f->bin, NULL) < 0)
            return -1;
        if (ref.ndim != 0 || strcmp(ref.dtype.str, dt.str))
            return grr_fail(r, "%s: scalar array does not match dtype %s", where, dt.str);
        return 0;
    }
    double x, y;
    switch (dt.kind) {
    case 'c':
        if (!json_is_array(v) || json_array_size(v) != 2)
            return grr_fail(r, "%s: complex scalar must be [real, imag]", where);
        if (json_float(r, json_array_get(v, 0), where, &x) < 0 ||
            json_float(r, json_array_get(v, 1), where, &y) < 0)
            return -1;
        if (dt.itemsize == 8 && (x > 3.4028234663852886e38 || x < -3.4028234663852886e38 ||
                                 y > 3.4028234663852886e38 || y < -3.4028234663852886e38))
            return grr_fail(r, "%s: out of range for %s", where, dt.str);
        return 0;
    case 'f':
        if (json_float(r, v, where, &x) < 0) return -1;
        if ((dt.itemsize == 2 && (x > 65504.0 || x < -65504.0)) ||
            (dt.itemsize == 4 && (x > 3.4028234663852886e38 || x < -3.4028234663852886e38)))
            return grr_fail(r, "%s: out of range for %s", where, dt.str);
        return 0;
    case 'b':
        if (!json_is_boolean(v)) return grr_fail(r, "%s: bool scalar must be true or false", where);
        return 0;
    case 'i': case 'u': {
        if (!json_is_integer(v)) return grr_fail(r, "%s: integer scalar must be an integer", where);
        long long n = json_integer_value(v);
        int bits = (int)dt.itemsize * 8;
        int ok = dt.kind == 'u' ? n >= 0 && (bits == 64 || (unsigned long long)n < 1ull << bits)
                                : bits == 64 || (n >= -(1ll << (bits - 1)) && n < 1ll << (bits - 1));
        if (!ok) return grr_fail(r, "%s: %lld out of range for %s", where, n, dt.str);
        return 0;
    }
    default:
        return grr_fail(r, "%s: bad scalar of dtype %s", where, dt.str);
    }
}

static int check_value(bin_t *f, json_t *v, const char *where, int depth, int *hashable) {
    grr_reader *r = f->r;
    int h = 1;
    if (depth > GRR_MAX_NESTING)
        return grr_fail(r, "%s: nested deeper than %d levels", where, GRR_MAX_NESTING);
    *hashable = 0;
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            if (check_value(f, json_array_get(v, i), where, depth + 1, &h) < 0) return -1;
        return 0;
    }
    if (!json_is_object(v)) {
        *hashable = 1;
        return 0;
    }
    json_t *t = json_object_get(v, "__type");
    if (!t || json_is_null(t)) {
        const char *k;
        json_t *x;
        json_object_foreach(v, k, x) if (check_value(f, x, where, depth + 1, &h) < 0) return -1;
        return 0;
    }
    const char *kind = json_is_string(t) ? json_string_value(t) : "";
    if (!strcmp(kind, "ndarray")) {
        ref_t ref;
        if (parse_ref(r, v, where, 1, f->bin, &ref) < 0 || bin_open(f) < 0) return -1;
        return read_ref(f, &ref, where, f->bin, NULL);
    }
    *hashable = 1;
    if (!strcmp(kind, "float")) {
        double x;
        return json_float(r, json_object_get(v, "value"), where, &x);
    }
    if (!strcmp(kind, "scalar")) return check_scalar(f, v, where, depth);
    if (!strcmp(kind, "bytes")) {
        const char *s = json_string_value(json_object_get(v, "base64"));
        if (!s) return grr_fail(r, "%s: bytes need a base64 string", where);
        if (!base64_ok(s)) return grr_fail(r, "%s: bad base64", where);
        return 0;
    }
    if (!strcmp(kind, "tuple")) {
        json_t *items = json_object_get(v, "items");
        if (!json_is_array(items)) return grr_fail(r, "%s: tuple items must be a list", where);
        for (size_t i = 0; i < json_array_size(items); i++) {
            if (check_value(f, json_array_get(items, i), where, depth + 1, &h) < 0) return -1;
            *hashable &= h;
        }
        return 0;
    }
    *hashable = 0;
    if (!strcmp(kind, "dict")) {
        json_t *items = json_object_get(v, "items");
        int ok = json_is_array(items);
        for (size_t i = 0; ok && i < json_array_size(items); i++) {
            json_t *p = json_array_get(items, i);
            ok = json_is_array(p) && json_array_size(p) == 2;
        }
        if (!ok) return grr_fail(r, "%s: dict items must be a list of [key, value] pairs", where);
        for (size_t i = 0; i < json_array_size(items); i++) {
            json_t *p = json_array_get(items, i);
            if (check_value(f, json_array_get(p, 0), where, depth + 1, &h) < 0) return -1;
            if (!h) return grr_fail(r, "%s: unhashable dict key", where);
            if (check_value(f, json_array_get(p, 1), where, depth + 1, &h) < 0) return -1;
        }
        return 0;
    }
    if (!strcmp(kind, "graph")) {
        static const char *keys[] = {"nodes", "edges", "edge_links"};
        for (int i = 0; i < 3; i++) {
            json_t *x = json_object_get(v, keys[i]);
            if (x && check_value(f, x, where, depth + 1, &h) < 0) return -1;
        }
        return 0;
    }
    return grr_fail(r, "%s: unknown __type", where);
}

/* ---- entries --------------------------------------------------------------------------- */

static int load_batch(grr_reader *r, grr_writer *w, size_t b, json_t **out) {
    if (w->docs[b]) {
        *out = w->docs[b];
        return 0;
    }
    json_t *info = w->batches[b];
    const char *fn = json_string_value(json_object_get(info, "fn"));
    int64_t size = -1, first = 0, len = 0, want_crc = 0;
    uint32_t crc;
    json_t *doc;
    if (!w->legacy) grr_get_int(info, "json_size", &size);
    grr_get_int(info, "first", &first);
    grr_get_int(info, "len", &len);
    grr_get_int(info, "json_crc32", &want_crc);
    if (grr_read_json(r, fn, size, &doc, &crc) < 0) return -1;
    int rc = 0;
    json_t *entries = json_object_get(doc, "episodes");
    if (!w->legacy && crc != (uint32_t)want_crc)
        rc = grr_fail(r, "%s: CRC-32 does not match the manifest", fn);
    else if (!json_is_object(doc) || !json_is_array(entries))
        rc = grr_fail(r, "%s: a batch must be an object with an 'episodes' list", fn);
    else if ((int64_t)json_array_size(entries) != len)
        rc = grr_fail(r, "%s: %zu entries, the manifest says %lld", fn, json_array_size(entries),
                      (long long)len);
    for (size_t pos = 0; rc == 0 && pos < json_array_size(entries); pos++) {
        json_t *e = json_array_get(entries, pos);
        int64_t ep, part, index;
        if (!json_is_object(e)) rc = grr_fail(r, "%s entry %zu: must be an object", fn, pos);
        else if (w->legacy) continue;
        else if (!grr_get_int(e, "episode", &ep) || !grr_get_int(e, "part", &part) || ep < 0 ||
                 part < 0)
            rc = grr_fail(r, "%s entry %zu: bad 'episode' or 'part'", fn, pos);
        else if (!grr_get_int(e, "index", &index) || index != first + (int64_t)pos)
            rc = grr_fail(r, "%s entry %zu: 'index' is not %lld", fn, pos,
                          (long long)(first + (int64_t)pos));
    }
    if (rc < 0) {
        json_decref(doc);
        return -1;
    }
    w->docs[b] = *out = doc;
    return 0;
}

static int64_t batch_int(json_t *b, const char *key, int64_t dflt) {
    int64_t v;
    return grr_get_int(b, key, &v) ? v : dflt;
}

/* One entry of the episode, checked, with the references of its arrays. */
typedef struct {
    json_t *entry;
    const char *fn;
    bin_t bin;
    int part_no;
    int64_t steps, rows;
    char where[600];
    json_t **leaves;          /* n_obs + n_act stored leaves */
    ref_t *refs;              /* n_obs + n_act + 3, for the array leaves and step columns */
} part_t;

static int plan_part(grr_reader *r, grr_writer *w, part_t *p) {
    json_t *e = p->entry;
    int64_t steps;
    if (!grr_get_int(e, "steps", &steps) || steps < 0)
        return grr_fail(r, "%s: 'steps' must be a non-negative integer", p->where);
    p->steps = steps;
    p->rows = p->part_no == 0 ? steps + 1 : steps;
    int n = w->n_obs + w->n_act;
    p->leaves = calloc((size_t)n + 1, sizeof *p->leaves);
    p->refs = calloc((size_t)n + 3, sizeof *p->refs);
    if (!p->leaves || !p->refs) return grr_fail(r, "%s: out of memory", p->where);
    if (grr_tree_leaves(r, w->obs, json_object_get(e, "observations"), p->where, p->leaves) < 0 ||
        grr_tree_leaves(r, w->act, json_object_get(e, "actions"), p->where,
                        p->leaves + w->n_obs) < 0)
        return -1;
    return 0;
}

/* Checks an array slot's reference: shape (rows, *leaf shape), dtype for the step columns. */
static int check_slot(grr_reader *r, part_t *p, json_t *o, const char *what, int64_t rows,
                      const grr_node *leaf, const char *dtype, ref_t *ref) {
    char where[700];
    snprintf(where, sizeof where, "%s %s", p->where, what);
    if (!is_ref(o)) return grr_fail(r, "%s: expected an array reference", where);
    if (parse_ref(r, o, where, 1, p->bin.bin, ref) < 0) return -1;
    int ndim = 1 + (leaf ? leaf->ndim : 0);
    int ok = ref->ndim == ndim && ref->shape[0] == (uint64_t)rows;
    for (int i = 1; ok && i < ndim; i++) ok = ref->shape[i] == leaf->shape[i - 1];
    if (!ok) return grr_fail(r, "%s: shape does not match the space", where);
    if (dtype && strcmp(ref->dtype.str, dtype))
        return grr_fail(r, "%s: dtype %s, expected %s", where, ref->dtype.str, dtype);
    return 0;
}

static int check_slots(grr_reader *r, grr_writer *w, part_t *p) {
    static const char *cols[] = {"rewards", "terminations", "truncations"};
    static const char *types[] = {"<f8", "|b1", "|b1"};
    for (int pass = 0; pass < 2; pass++) {
        grr_node *root = pass ? w->act : w->obs;
        int base = pass ? w->n_obs : 0, count = pass ? w->n_act : w->n_obs;
        for (int k = 0; k < count; k++) {
            /* find leaf k's node */
            grr_node *stack[GRR_MAX_NESTING + 2];
            int top = 0;
            grr_node *leaf = NULL;
            stack[top++] = root;
            while (top && !leaf) {
                grr_node *n = stack[--top];
                if (n->kind == NODE_DICT || n->kind == NODE_TUPLE) {
                    for (size_t i = n->n; i-- > 0 && top < GRR_MAX_NESTING + 2;)
                        stack[top++] = n->kids[i];
                } else if (n->leaf == k) {
                    leaf = n;
                }
            }
            if (!leaf || leaf->kind != NODE_ARRAY) continue;
            if (check_slot(r, p, p->leaves[base + k], leaf->name, pass ? p->steps : p->rows,
                           leaf, NULL, &p->refs[base + k]) < 0)
                return -1;
        }
    }
    for (int c = 0; c < 3; c++)
        if (check_slot(r, p, json_object_get(p->entry, cols[c]), cols[c], p->steps, NULL,
                       types[c], &p->refs[w->n_obs + w->n_act + c]) < 0)
            return -1;
    return 0;
}

static int check_infos(grr_reader *r, part_t *p) {
    json_t *infos = json_object_get(p->entry, "infos");
    json_t *keys = json_object_get(infos, "keys");
    int64_t rows;
    if (!json_is_object(infos) || !grr_get_int(infos, "rows", &rows) || rows != p->rows ||
        !json_is_array(keys))
        return grr_fail(r, "%s: 'infos' must be {'rows': %lld, 'keys': [...]}", p->where,
                        (long long)p->rows);
    char where[700];
    for (size_t k = 0; k < json_array_size(keys); k++) {
        json_t *col = json_array_get(keys, k);
        snprintf(where, sizeof where, "%s infos column %zu", p->where, k);
        if (!json_is_object(col) || !json_is_string(json_object_get(col, "key")))
            return grr_fail(r, "%s: a column needs a string 'key'", where);
        json_t *index = json_object_get(col, "index"), *values = json_object_get(col, "values");
        const char *kind = json_string_value(json_object_get(col, "kind"));
        int is_array = kind && !strcmp(kind, "array");
        if (index && !json_is_null(index) && !is_ref(index))
            return grr_fail(r, "%s index: expected an array reference", where);
        if (is_array && !is_ref(values))
            return grr_fail(r, "%s values: expected an array reference", where);
        if (!is_array && (!kind || strcmp(kind, "values") || !json_is_array(values)))
            return grr_fail(r, "%s: 'kind' must be 'array' or 'values'", where);
    }
    for (size_t k = 0; k < json_array_size(keys); k++) {
        json_t *col = json_array_get(keys, k);
        snprintf(where, sizeof where, "%s infos column %zu", p->where, k);
        json_t *index = json_object_get(col, "index"), *values = json_object_get(col, "values");
        uint64_t present = (uint64_t)rows;
        ref_t ref;
        if (index && !json_is_null(index)) {
            if (parse_ref(r, index, where, 1, p->bin.bin, &ref) < 0 || bin_open(&p->bin) < 0 ||
                check_bounds(&p->bin, &ref, where, p->bin.bin) < 0)
                return -1;
            if (strcmp(ref.dtype.str, "<i8") || ref.ndim != 1)
                return grr_fail(r, "%s: index must be ascending int64 rows in [0, %lld)", where,
                                (long long)rows);
            present = ref.shape[0];
            unsigned char *buf = malloc(ref.size ? ref.size : 1);
            if (!buf) return grr_fail(r, "%s: out of memory", where);
            int rc = read_ref(&p->bin, &ref, where, p->bin.bin, buf);
            for (uint64_t i = 0; rc == 0 && i < present; i++) {
                int64_t v, prev = -1;
                memcpy(&v, buf + 8 * i, 8);
                if (i) memcpy(&prev, buf + 8 * (i - 1), 8);
                if (v < 0 || v >= rows || (i && v <= prev))
                    rc = grr_fail(r, "%s: index must be ascending int64 rows in [0, %lld)",
                                  where, (long long)rows);
            }
            free(buf);
            if (rc < 0) return -1;
        }
        if (json_is_array(values)) {
            if (json_array_size(values) != present)
                return grr_fail(r, "%s: %zu values for %llu rows", where,
                                json_array_size(values), (unsigned long long)present);
            int h;
            for (size_t i = 0; i < json_array_size(values); i++)
                if (check_value(&p->bin, json_array_get(values, i), where, 0, &h) < 0) return -1;
        } else {
            if (parse_ref(r, values, where, 1, p->bin.bin, &ref) < 0 || bin_open(&p->bin) < 0 ||
                read_ref(&p->bin, &ref, where, p->bin.bin, NULL) < 0)
                return -1;
            if (ref.ndim == 0 || ref.shape[0] != present)
                return grr_fail(r, "%s: values do not match %llu rows", where,
                                (unsigned long long)present);
            json_t *pytype = json_object_get(col, "pytype");
            const char *pt = json_string_value(pytype);
            if (pytype && !json_is_null(pytype) &&
                (!pt || (strcmp(pt, "bool") && strcmp(pt, "int") && strcmp(pt, "float"))))
                return grr_fail(r, "%s: unknown pytype", where);
        }
    }
    return 0;
}

static const char *ENDS[] = {"terminated", "truncated", "reset", "close"};

static int check_meta(grr_reader *r, part_t *p) {
    json_t *e = p->entry;
    json_t *seed = json_object_get(e, "seed"), *end = json_object_get(e, "end");
    json_t *sub = json_object_get(e, "sub_env");
    if (seed && !json_is_null(seed) && !json_is_integer(seed))
        return grr_fail(r, "%s: 'seed' must be an integer or null", p->where);
    if (end && !json_is_null(end)) {
        const char *s = grr_string(end);
        int ok = 0;
        for (int i = 0; s && i < 4; i++) ok |= !strcmp(s, ENDS[i]);
        if (!ok) return grr_fail(r, "%s: unknown end", p->where);
    }
    if (sub && !json_is_null(sub) && !json_is_integer(sub))
        return grr_fail(r, "%s: 'sub_env' must be an integer or null", p->where);
    json_t *options = json_object_get(e, "options");
    int h;
    char where[700];
    snprintf(where, sizeof where, "%s options", p->where);
    return options ? check_value(&p->bin, options, where, 0, &h) : 0;
}

/* Checks a values leaf's rows of one part and appends them to out. */
static int values_leaf(grr_reader *r, part_t *p, json_t *stored, const grr_node *leaf,
                       int64_t rows, json_t *out) {
    json_t *values = json_object_get(stored, "values");
    const char *t = json_string_value(json_object_get(stored, "__type"));
    if (!json_is_object(stored) || !t || strcmp(t, "values") || !json_is_array(values))
        return grr_fail(r, "%s %s: expected {'__type': 'values', 'values': [...]}", p->where,
                        leaf->name);
    int h;
    for (size_t i = 0; i < json_array_size(values); i++) {
        json_t *v = json_array_get(values, i);
        if (check_value(&p->bin, v, p->where, 0, &h) < 0) return -1;
        if (leaf->text && !json_is_string(v))
            return grr_fail(r, "%s %s: Text rows must be strings", p->where, leaf->name);
    }
    if ((int64_t)json_array_size(values) != rows)
        return grr_fail(r, "%s %s: %zu rows, expected %lld", p->where, leaf->name,
                        json_array_size(values), (long long)rows);
    return json_array_extend(out, values);
}

static void collect_leaves(grr_node *n, grr_node **out) {
    if (n->kind == NODE_DICT || n->kind == NODE_TUPLE) {
        for (size_t i = 0; i < n->n; i++) collect_leaves(n->kids[i], out);
    } else {
        out[n->leaf] = n;
    }
}

int grr_legacy_episode(grr_reader *r, grr_writer *w, size_t b, json_t *entry, const char *fn,
                       size_t pos, grr_episode *ep);

/* ---- widened leaves: numpy's result_type of the parts' dtypes, and the conversion -------- */

static int float_size_for_int(size_t n) { return n == 1 ? 2 : n == 2 ? 4 : 8; }

/* numpy's np.result_type(a, b) for the kinds b, i, u, f (and U with U, S with S); -1 for mixes
 * the format refuses, and for complex and half/long double results this reader leaves out. */
static int result_dtype(const grr_dtype *a, const grr_dtype *b, grr_dtype *out) {
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

/* Converts n elements from one dtype to a wider one (as numpy's astype does for these). */
static void convert(const grr_dtype *from, const unsigned char *src, const grr_dtype *to,
                    unsigned char *dst, uint64_t n) {
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
        return;
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
        } else if (to->kind == 'f') {
            memcpy(out, &d, 8);
        } else {
            uint64_t v = (uint64_t)si;
            for (size_t k = 0; k < ts; k++) out[k] = (unsigned char)(v >> (8 * k));
        }
    }
}

int grr_episode_build(grr_reader *r, grr_writer *w, int64_t number, grr_episode *ep) {
    size_t b = 0;
    while (b + 1 < w->nbatches && w->starts[b + 1] <= number) b++;
    while (b > 0 && w->starts[b] == w->starts[b - 1] &&
           batch_int(w->batches[b], "episodes", batch_int(w->batches[b], "len", 0)) == 0)
        b--;
    ep->writer = strdup(w->prefix);
    if (!ep->writer) return grr_fail(r, "%s: out of memory", w->name);
    json_t *doc;
    if (w->legacy) {
        if (w->nbatches == 0 || load_batch(r, w, b, &doc) < 0) return -1;
        size_t pos = (size_t)(number - w->starts[b]);
        return grr_legacy_episode(r, w, b, json_array_get(json_object_get(doc, "episodes"), pos),
                                  json_string_value(json_object_get(w->batches[b], "fn")), pos,
                                  ep);
    }
    /* The entries of the episode (see "Batch" and "first" under "Manifest"). */
    size_t cap = 4, nparts = 0;
    part_t *parts = calloc(cap, sizeof *parts);
    int rc = parts ? 0 : grr_fail(r, "%s: out of memory", w->name);
    int64_t episode_id = -1;
    while (rc == 0 && b < w->nbatches) {
        if (load_batch(r, w, b, &doc) < 0) {
            rc = -1;
            break;
        }
        json_t *entries = json_object_get(doc, "episodes");
        size_t n = json_array_size(entries), pos = n;
        if (nparts == 0) {
            int64_t k = number - w->starts[b], seen = 0;
            for (size_t i = 0; i < n && pos == n; i++) {
                int64_t part;
                if (grr_get_int(json_array_get(entries, i), "part", &part) && part == 0 &&
                    seen++ == k)
                    pos = i;
            }
            if (pos == n) {
                b++;
                continue;
            }
            grr_get_int(json_array_get(entries, pos), "episode", &episode_id);
        } else {
            for (size_t i = 0; i < n; i++) {
                int64_t e, part;
                json_t *x = json_array_get(entries, i);
                if (grr_get_int(x, "episode", &e) && grr_get_int(x, "part", &part) &&
                    e == episode_id && part == (int64_t)nparts)
                    pos = i; /* the last such entry, as a reader keyed by (episode, part) */
            }
            if (pos == n) {
                json_t *prev = w->batches[b - 1];
                if (batch_int(w->batches[b], "first", 0) !=
                    batch_int(prev, "first", 0) + batch_int(prev, "len", 0))
                    break; /* the next part was in a batch that is gone: the episode ends */
                rc = grr_fail(r, "%s: episode %lld part %zu missing",
                              json_string_value(json_object_get(w->batches[b], "fn")),
                              (long long)number, nparts);
                break;
            }
        }
        if (nparts == cap) {
            part_t *grown = realloc(parts, 2 * cap * sizeof *parts);
            if (!grown) {
                rc = grr_fail(r, "%s: out of memory", w->name);
                break;
            }
            memset(grown + cap, 0, cap * sizeof *parts);
            parts = grown;
            cap *= 2;
        }
        part_t *p = &parts[nparts];
        p->entry = json_array_get(entries, pos);
        p->fn = json_string_value(json_object_get(w->batches[b], "fn"));
        p->bin.r = r;
        p->bin.bin = json_string_value(json_object_get(w->batches[b], "bin"));
        p->bin.bin_size = batch_int(w->batches[b], "bin_size", 0);
        p->bin.fd = -1;
        p->part_no = (int)nparts++;
        snprintf(p->where, sizeof p->where, "%s entry %lld", p->fn,
                 (long long)batch_int(p->entry, "index", 0));
        if (!json_is_true(json_object_get(p->entry, "continues"))) break;
        b++;
    }
    if (rc == 0 && nparts == 0)
        rc = grr_fail(r, "%s: episode %lld not found in its batches", w->name, (long long)number);
    /* Check every part; then read the stacked arrays and check the values. */
    int nslots = w->n_obs + w->n_act + 3;
    for (size_t i = 0; rc == 0 && i < nparts; i++) {
        part_t *p = &parts[i];
        rc = plan_part(r, w, p);
        if (rc == 0) rc = check_infos(r, p);
        if (rc == 0) rc = bin_open(&p->bin);
        if (rc == 0) rc = check_slots(r, w, p);
    }
    grr_node **leaves = calloc((size_t)nslots, sizeof *leaves);
    if (rc == 0 && !leaves) rc = grr_fail(r, "%s: out of memory", w->name);
    if (rc == 0) {
        collect_leaves(w->obs, leaves);
        collect_leaves(w->act, leaves + w->n_obs);
        ep->fields = calloc((size_t)nslots, sizeof *ep->fields);
        if (!ep->fields) rc = grr_fail(r, "%s: out of memory", w->name);
    }
    static const char *cols[] = {"rewards", "terminations", "truncations"};
    for (int s = 0; rc == 0 && s < nslots; s++) {
        grr_field *fd = &ep->fields[s];
        ep->nfields = (size_t)s + 1;
        grr_node *leaf = s < w->n_obs + w->n_act ? leaves[s] : NULL;
        fd->name = strdup(leaf ? leaf->name : cols[s - w->n_obs - w->n_act]);
        if (!fd->name) {
            rc = grr_fail(r, "%s: out of memory", w->name);
            break;
        }
        if (leaf && leaf->kind == NODE_VALUES) {
            json_t *all = json_array();
            fd->is_values = 1;
            for (size_t i = 0; rc == 0 && i < nparts; i++)
                rc = values_leaf(r, &parts[i], parts[i].leaves[s], leaf,
                                 s < w->n_obs ? parts[i].rows : parts[i].steps, all);
            if (rc == 0) {
                fd->values_json = json_dumps(all, JSON_COMPACT | JSON_ENCODE_ANY);
                if (!fd->values_json) rc = grr_fail(r, "%s: out of memory", w->name);
            }
            json_decref(all);
            continue;
        }
        grr_array *a = &fd->array;
        ref_t *first = &parts[0].refs[s];
        grr_dtype res = first->dtype;
        uint64_t rows = 0, count = 0;
        for (size_t i = 0; rc == 0 && i < nparts; i++) {
            ref_t *ref = &parts[i].refs[s];
            if (result_dtype(&res, &ref->dtype, &res) < 0)
                rc = grr_fail(r, "%s %s: the episode's parts store the leaf with dtypes that do "
                                 "not mix (or that this reader does not convert): %s, %s",
                              parts[0].where, fd->name, first->dtype.str, ref->dtype.str);
            rows += ref->shape[0];
            count += ref->size / ref->dtype.itemsize;
        }
        if (rc < 0) break;
        snprintf(a->dtype, sizeof a->dtype, "%s", res.str);
        a->itemsize = res.itemsize;
        a->ndim = first->ndim;
        memcpy(a->shape, first->shape, sizeof a->shape);
        a->shape[0] = rows;
        a->size = count * res.itemsize;
        a->data = malloc(a->size ? a->size : 1);
        if (!a->data) {
            rc = grr_fail(r, "%s: cannot allocate %llu bytes for the episode", parts[0].where,
                          (unsigned long long)a->size);
            break;
        }
        uint64_t at = 0;
        for (size_t i = 0; rc == 0 && i < nparts; i++) {
            ref_t *ref = &parts[i].refs[s];
            char where[700];
            snprintf(where, sizeof where, "%s %s", parts[i].where, fd->name);
            uint64_t n = ref->size / ref->dtype.itemsize;
            if (!strcmp(ref->dtype.str, res.str)) {
                rc = read_ref(&parts[i].bin, ref, where, parts[i].bin.bin, a->data + at);
            } else {
                unsigned char *tmp = malloc(ref->size ? ref->size : 1);
                rc = tmp ? read_ref(&parts[i].bin, ref, where, parts[i].bin.bin, tmp)
                         : grr_fail(r, "%s: out of memory", where);
                if (rc == 0) convert(&ref->dtype, tmp, &res, a->data + at, n);
                free(tmp);
            }
            at += n * res.itemsize;
        }
    }
    free(leaves);
    for (size_t i = 0; rc == 0 && i < nparts; i++) rc = check_meta(r, &parts[i]);
    if (rc == 0) {
        json_t *e0 = parts[0].entry, *last = parts[nparts - 1].entry;
        int64_t v;
        for (size_t i = 0; i < nparts; i++) ep->steps += parts[i].steps;
        ep->parts = (int)nparts;
        if ((ep->has_seed = grr_get_int(e0, "seed", &v))) ep->seed = v;
        if ((ep->has_sub_env = grr_get_int(e0, "sub_env", &v))) ep->sub_env = v;
        const char *end = json_string_value(json_object_get(last, "end"));
        if (end && !json_is_true(json_object_get(last, "continues"))) {
            ep->end = strdup(end);
            if (!ep->end) rc = grr_fail(r, "%s: out of memory", w->name);
        }
    }
    for (size_t i = 0; i < nparts; i++) {
        bin_close(&parts[i].bin);
        free(parts[i].leaves);
        free(parts[i].refs);
    }
    free(parts);
    return rc;
}

/* ---- OpenAI gym-recording ("legacy") episodes ("Version history") ------------------------ */

/* One legacy column as an array: a reference, a list of references of one shape and dtype
 * (one per step, stacked), or a list of JSON numbers/bools. */
static int legacy_array(grr_reader *r, json_t *v, const char *where, grr_array *a) {
    ref_t ref;
    bin_t f = {r, NULL, -1, -1, 0};
    memset(a, 0, sizeof *a);
    if (is_ref(v) || (json_is_array(v) && json_array_size(v) && is_ref(json_array_get(v, 0)))) {
        int stacked = !is_ref(v);
        size_t n = stacked ? json_array_size(v) : 1;
        for (size_t i = 0; i < n; i++) {
            json_t *o = stacked ? json_array_get(v, i) : v;
            if (!is_ref(o)) return grr_fail(r, "%s: a list mixing arrays and other values "
                                               "(not supported by this reader)", where);
            if (parse_ref(r, o, where, 0, NULL, &ref) < 0) return -1;
            f.bin = json_string_value(json_object_get(o, "npyfile"));
            if (i == 0) {
                snprintf(a->dtype, sizeof a->dtype, "%s", ref.dtype.str);
                a->itemsize = ref.dtype.itemsize;
                a->ndim = ref.ndim + stacked;
                if (stacked && a->ndim > GRR_MAX_NDIM)
                    return grr_fail(r, "%s: too many dimensions", where);
                a->shape[0] = n;
                memcpy(a->shape + stacked, ref.shape, (size_t)ref.ndim * sizeof ref.shape[0]);
                a->size = ref.size * n;
                a->data = malloc(a->size ? a->size : 1);
                if (!a->data) return grr_fail(r, "%s: out of memory", where);
            } else if (strcmp(ref.dtype.str, a->dtype) || ref.ndim != a->ndim - 1 ||
                       memcmp(ref.shape, a->shape + 1, (size_t)ref.ndim * sizeof ref.shape[0])) {
                return grr_fail(r, "%s: per-step arrays of different shapes or dtypes (not "
                                   "supported by this reader)", where);
            }
            int rc = grr_open_regular(r, f.bin, &f.fd, &f.file_size);
            if (rc == 0) rc = read_ref(&f, &ref, where, f.bin, a->data + i * ref.size);
            bin_close(&f);
            if (rc < 0) return -1;
        }
        return 0;
    }
    if (!json_is_array(v) || !json_array_size(v))
        return grr_fail(r, "%s: a legacy layout this reader does not support", where);
    size_t n = json_array_size(v);
    int all_bool = 1, any_real = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(v, i);
        if (!json_is_number(x) && !json_is_boolean(x))
            return grr_fail(r, "%s: a legacy layout this reader does not support", where);
        all_bool &= json_is_boolean(x);
        any_real |= json_is_real(x);
    }
    const char *dt = all_bool ? "|b1" : any_real ? "<f8" : "<i8";
    snprintf(a->dtype, sizeof a->dtype, "%s", dt);
    a->itemsize = all_bool ? 1 : 8;
    a->ndim = 1;
    a->shape[0] = n;
    a->size = n * a->itemsize;
    a->data = malloc(a->size);
    if (!a->data) return grr_fail(r, "%s: out of memory", where);
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(v, i);
        if (all_bool) {
            a->data[i] = json_is_true(x);
        } else if (any_real) {
            double d = json_is_boolean(x) ? json_is_true(x) : json_number_value(x);
            memcpy(a->data + 8 * i, &d, 8);
        } else {
            int64_t k = json_is_boolean(x) ? json_is_true(x) : json_integer_value(x);
            memcpy(a->data + 8 * i, &k, 8);
        }
    }
    return 0;
}

/* An element of a numeric array as a double (for the rewards, which are float64). */
static int element_double(const grr_array *a, uint64_t i, double *out) {
    unsigned char b[8];
    size_t n = a->itemsize;
    char kind = a->dtype[1];
    if (n > 8 || !strchr("biuf", kind) || (kind == 'f' && n < 4)) return -1;
    for (size_t k = 0; k < n; k++) b[k] = a->data[i * n + (a->dtype[0] == '>' ? n - 1 - k : k)];
    uint64_t u = 0;
    for (size_t k = 0; k < n; k++) u |= (uint64_t)b[k] << (8 * k);
    if (kind == 'f') {
        if (n == 4) {
            float f;
            uint32_t u32 = (uint32_t)u;
            memcpy(&f, &u32, 4);
            *out = f;
        } else {
            memcpy(out, &u, 8);
        }
    } else if (kind == 'i' && n < 8 && (u >> (8 * n - 1)) & 1) {
        *out = (double)(int64_t)(u | (~0ull << (8 * n)));
    } else {
        *out = kind == 'i' ? (double)(int64_t)u : (double)u;
    }
    return 0;
}

static int field(grr_episode *ep, const char *name, grr_array *a) {
    grr_field *f = &ep->fields[ep->nfields++];
    f->name = strdup(name);
    f->array = *a;
    memset(a, 0, sizeof *a);
    return f->name ? 0 : -1;
}

int grr_legacy_episode(grr_reader *r, grr_writer *w, size_t b, json_t *entry, const char *fn,
                       size_t pos, grr_episode *ep) {
    (void)w;
    (void)b;
    char where[700];
    static const char *keys[] = {"observations", "actions", "rewards"};
    grr_array arr[3];
    memset(arr, 0, sizeof arr);
    int rc = 0;
    for (int k = 0; k < 3 && rc == 0; k++) {
        snprintf(where, sizeof where, "%s episode %zu %s", fn, pos, keys[k]);
        json_t *v = json_object_get(entry, keys[k]);
        rc = v ? legacy_array(r, v, where, &arr[k])
               : grr_fail(r, "%s episode %zu: missing '%s'", fn, pos, keys[k]);
    }
    uint64_t n_obs = rc == 0 && arr[0].ndim ? arr[0].shape[0] : 0;
    uint64_t steps = n_obs ? n_obs - 1 : 0;
    grr_array rew = {"<f8", 8, 1, {steps}, steps * 8, NULL};
    if (rc == 0) {
        uint64_t count = 1;
        for (int i = 0; i < arr[2].ndim; i++) count *= arr[2].shape[i];
        if (steps && count != steps)
            rc = grr_fail(r, "%s episode %zu: %llu rewards for %llu observations", fn, pos,
                          (unsigned long long)count, (unsigned long long)n_obs);
        rew.data = malloc(steps ? steps * 8 : 1);
        if (rc == 0 && !rew.data) rc = grr_fail(r, "%s: out of memory", fn);
        for (uint64_t i = 0; rc == 0 && i < steps; i++) {
            double d;
            if (element_double(&arr[2], i, &d) < 0)
                rc = grr_fail(r, "%s episode %zu: rewards of dtype %s (not supported by this "
                                 "reader)", fn, pos, arr[2].dtype);
            memcpy(rew.data + 8 * i, &d, 8);
        }
    }
    if (rc == 0 && arr[1].ndim == 2 && arr[1].shape[0] == 1 && arr[1].shape[1] == 0) {
        arr[1].ndim = 1; /* gym-recording wrote np.array([[]]) for "no actions" */
        arr[1].shape[0] = 0;
    }
    grr_array flags[2] = {{"|b1", 1, 1, {steps}, steps, calloc(steps ? steps : 1, 1)},
                          {"|b1", 1, 1, {steps}, steps, calloc(steps ? steps : 1, 1)}};
    ep->fields = calloc(5, sizeof *ep->fields);
    if (rc == 0 && (!ep->fields || !flags[0].data || !flags[1].data))
        rc = grr_fail(r, "%s: out of memory", fn);
    if (rc == 0 && (field(ep, "observations", &arr[0]) || field(ep, "actions", &arr[1]) ||
                    field(ep, "rewards", &rew) || field(ep, "terminations", &flags[0]) ||
                    field(ep, "truncations", &flags[1])))
        rc = grr_fail(r, "%s: out of memory", fn);
    ep->steps = (int64_t)steps;
    ep->parts = 1;
    for (int k = 0; k < 3; k++) free(arr[k].data);
    free(rew.data);
    free(flags[0].data);
    free(flags[1].data);
    return rc;
}
