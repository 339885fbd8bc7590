/* grr: checking VALUEs (infos, options, values rows) ("Values"). */
#include "grr_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

int check_value(bin_t *f, json_t *v, const char *where, int depth, int *hashable);

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

int check_value(bin_t *f, json_t *v, const char *where, int depth, int *hashable) {
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

