/* grr: a space description's leaves ("Spaces", "Trees"). Keys a description does not need are
 * ignored, so that later additions to the format (a Text charset's form, ...) do not matter. */
#include "grr_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void grr_node_free(grr_node *n) {
    if (!n) return;
    for (size_t i = 0; i < n->n; i++) {
        grr_node_free(n->kids[i]);
        if (n->keys) free(n->keys[i]);
    }
    free(n->kids);
    free(n->keys);
    free(n->name);
    free(n);
}

/* A shape as the spaces give it: at most 32 dimensions of 0..2^32, product at most 2^32. */
static int space_shape(grr_node *n, json_t *list) {
    if (!json_is_array(list) || json_array_size(list) > GRR_MAX_NDIM) return -1;
    uint64_t prod = 1;
    n->ndim = (int)json_array_size(list);
    for (int i = 0; i < n->ndim; i++) {
        json_t *d = json_array_get(list, (size_t)i);
        if (!json_is_integer(d) || json_integer_value(d) < 0 ||
            json_integer_value(d) > (1ll << 32))
            return -1;
        n->shape[i] = (uint64_t)json_integer_value(d);
        if (prod <= (1ull << 32)) prod *= n->shape[i] ? n->shape[i] : 0;
        if (n->shape[i] == 0) prod = 0;
    }
    return prod > (1ull << 32) ? -1 : 0;
}

/* The shape of a rectangular nested list (numpy's np.shape), for MultiDiscrete's nvec. */
static int nested_shape(json_t *v, int depth, int *ndim, uint64_t *shape) {
    if (!json_is_array(v)) {
        if (*ndim < 0) *ndim = depth;
        return *ndim == depth ? 0 : -1;
    }
    if (depth >= GRR_MAX_NDIM) return -1;
    size_t len = json_array_size(v);
    if (*ndim >= 0 && (depth >= *ndim || shape[depth] != len)) return -1;
    if (*ndim < 0 && len == 0) {
        *ndim = depth + 1;
        shape[depth] = 0;
        return 0;
    }
    shape[depth] = len;
    for (size_t i = 0; i < len; i++)
        if (nested_shape(json_array_get(v, i), depth + 1, ndim, shape) < 0) return -1;
    return 0;
}

static char *join(const char *a, const char *b) {
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = malloc(n);
    if (s) snprintf(s, n, "%s/%s", a, b);
    return s;
}

grr_node *grr_layout(grr_reader *r, json_t *desc, const char *where, const char *name,
                     int depth, int *leaves) {
    if (depth > GRR_MAX_NESTING) {
        grr_fail(r, "%s: spaces nested too deeply", where);
        return NULL;
    }
    if (!json_is_object(desc)) {
        grr_fail(r, "%s: a space must be a JSON object", where);
        return NULL;
    }
    grr_node *n = calloc(1, sizeof *n);
    if (!n) {
        grr_fail(r, "%s: out of memory", where);
        return NULL;
    }
    const char *type = grr_string(json_object_get(desc, "type"));
    if (!type) type = "";
    if (!strcmp(type, "Dict") || !strcmp(type, "Tuple")) {
        int dict = !strcmp(type, "Dict");
        json_t *subs = json_object_get(desc, "spaces");
        if (!json_is_array(subs)) {
            grr_fail(r, "%s: %s spaces must be a list", where, type);
            goto bad;
        }
        n->kind = dict ? NODE_DICT : NODE_TUPLE;
        size_t count = json_array_size(subs);
        n->kids = calloc(count ? count : 1, sizeof *n->kids);
        n->keys = dict ? calloc(count ? count : 1, sizeof *n->keys) : NULL;
        if (!n->kids || (dict && !n->keys)) {
            grr_fail(r, "%s: out of memory", where);
            goto bad;
        }
        for (size_t i = 0; i < count; i++) {
            json_t *sub = json_array_get(subs, i);
            char label[32];
            const char *key = label;
            if (dict) {
                if (!json_is_array(sub) || json_array_size(sub) != 2 ||
                    !json_is_string(json_array_get(sub, 0))) {
                    grr_fail(r, "%s: Dict spaces must be [key, space] pairs", where);
                    goto bad;
                }
                key = json_string_value(json_array_get(sub, 0));
                sub = json_array_get(sub, 1);
                n->keys[i] = strdup(key);
            } else {
                snprintf(label, sizeof label, "%zu", i);
            }
            char *child_name = join(name, key);
            if (!child_name || (dict && !n->keys[i])) {
                free(child_name);
                grr_fail(r, "%s: out of memory", where);
                goto bad;
            }
            n->kids[i] = grr_layout(r, sub, where, child_name, depth + 1, leaves);
            free(child_name);
            n->n = i + 1;
            if (!n->kids[i]) goto bad;
        }
        return n;
    }
    n->name = strdup(name);
    if (!n->name) {
        grr_fail(r, "%s: out of memory", where);
        goto bad;
    }
    n->kind = NODE_ARRAY;
    if (!strcmp(type, "Box") || !strcmp(type, "Discrete") || !strcmp(type, "MultiDiscrete")) {
        json_t *dt = json_object_get(desc, "dtype");
        const char *dts = !strcmp(type, "Discrete") && !dt ? "<i8" : grr_string(dt);
        if (!dts || grr_parse_dtype(dts, &n->dtype) < 0) {
            grr_fail(r, "%s: unsupported dtype", where);
            goto bad;
        }
        if (!strcmp(type, "Box")) {
            if (space_shape(n, json_object_get(desc, "shape")) < 0) {
                grr_fail(r, "%s: bad shape", where);
                goto bad;
            }
        } else if (!strcmp(type, "MultiDiscrete")) {
            json_t *nvec = json_object_get(desc, "nvec");
            int nd = -1;
            if (json_is_array(nvec)) {
                if (nested_shape(nvec, 0, &nd, n->shape) < 0) {
                    grr_fail(r, "%s: MultiDiscrete nvec is not a rectangular array", where);
                    goto bad;
                }
                n->ndim = nd;
                uint64_t prod = 1;
                for (int i = 0; i < nd; i++) {
                    if (n->shape[i] > (1ull << 32)) prod = (1ull << 33);
                    else if (prod <= (1ull << 32)) prod *= n->shape[i];
                }
                if (prod > (1ull << 32)) {
                    grr_fail(r, "%s: bad shape", where);
                    goto bad;
                }
            }
        }
    } else if (!strcmp(type, "MultiBinary")) {
        grr_parse_dtype("|i1", &n->dtype);
        json_t *nn = json_object_get(desc, "n");
        int rc;
        if (json_is_array(nn)) {
            rc = space_shape(n, nn);
        } else {
            json_t *one = json_pack("[O]", nn ? nn : json_null());
            rc = one ? space_shape(n, one) : -1;
            json_decref(one);
        }
        if (rc < 0) {
            grr_fail(r, "%s: bad shape", where);
            goto bad;
        }
    } else if (!strcmp(type, "Text") || !strcmp(type, "Graph") || !strcmp(type, "OneOf") ||
               !strcmp(type, "unknown") || !strcmp(type, "Sequence")) {
        n->kind = NODE_VALUES;
        n->text = !strcmp(type, "Text");
    } else {
        grr_fail(r, "%s: unknown space type '%s'", where, type);
        goto bad;
    }
    n->leaf = (*leaves)++;
    return n;
bad:
    grr_node_free(n);
    return NULL;
}

/* The stored leaf objects of a TREE, in leaf order (out has one slot per leaf). */
int grr_tree_leaves(grr_reader *r, const grr_node *n, json_t *tree, const char *where,
                    json_t **out) {
    if (n->kind == NODE_DICT) {
        if (!json_is_object(tree) || json_object_get(tree, "__type"))
            return grr_fail(r, "%s: expected an object for a Dict space", where);
        for (size_t i = 0; i < n->n; i++) {
            json_t *sub = json_object_get(tree, n->keys[i]);
            if (!sub) return grr_fail(r, "%s: missing key '%s'", where, n->keys[i]);
            if (grr_tree_leaves(r, n->kids[i], sub, where, out) < 0) return -1;
        }
        return 0;
    }
    if (n->kind == NODE_TUPLE) {
        if (!json_is_array(tree) || json_array_size(tree) != n->n)
            return grr_fail(r, "%s: expected a list of %zu for a Tuple space", where, n->n);
        for (size_t i = 0; i < n->n; i++)
            if (grr_tree_leaves(r, n->kids[i], json_array_get(tree, i), where, out) < 0)
                return -1;
        return 0;
    }
    out[n->leaf] = tree ? tree : json_null();
    return 0;
}

/* ---- the first writer's spaces, as a reader rebuilding them checks them ("Spaces") -------- */

#define MAX_BOX_BOUND_BYTES (1ull << 26)

typedef struct {
    double *v;
    uint64_t n, cap;
    int ndim;                 /* of the bound as given (0: one number for the whole Box) */
    uint64_t shape[GRR_MAX_NDIM];
} bound_t;

static int bound_walk(json_t *x, int depth, const grr_node *box, bound_t *b) {
    if (json_is_array(x)) {
        if (depth >= box->ndim) return -1; /* nested deeper than the Box's shape */
        size_t len = json_array_size(x);
        if (b->ndim <= depth) {
            b->ndim = depth + 1;
            b->shape[depth] = len;
        } else if (b->shape[depth] != len) {
            return -1; /* ragged */
        }
        for (size_t i = 0; i < len; i++)
            if (bound_walk(json_array_get(x, i), depth + 1, box, b) < 0) return -1;
        return 0;
    }
    if (b->ndim > depth && depth < GRR_MAX_NDIM && b->n) return -1; /* a number among lists */
    double d;
    if (json_is_string(x)) {
        const char *s = grr_string(x);
        if (!s) return -1;
        if (!strcmp(s, "nan")) d = NAN;
        else if (!strcmp(s, "inf")) d = INFINITY;
        else if (!strcmp(s, "-inf")) d = -INFINITY;
        else return -1;
    } else if (json_is_number(x)) {
        d = json_number_value(x);
    } else {
        return -1;
    }
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 16;
        double *grown = realloc(b->v, b->cap * sizeof *grown);
        if (!grown) return -1;
        b->v = grown;
    }
    b->v[b->n++] = d;
    return 0;
}

static int box_bound(grr_reader *r, const grr_node *box, json_t *x, const char *where,
                     bound_t *b) {
    memset(b, 0, sizeof *b);
    if (bound_walk(x, 0, box, b) < 0) return grr_fail(r, "%s: bad Box bound", where);
    int scalar = b->ndim == 0 && b->n == 1;
    int same = b->ndim == box->ndim;
    for (int i = 0; same && i < box->ndim; i++) same = b->shape[i] == box->shape[i];
    uint64_t count = 1;
    for (int i = 0; i < box->ndim; i++) count *= box->shape[i];
    if (count == 0 && b->n == 0) same = 1; /* a Box of no elements: [] whatever its shape */
    if (!scalar && (!same || b->n != count)) /* (a ragged list has fewer or more numbers) */
        return grr_fail(r, "%s: Box bound of a shape other than the Box's", where);
    if (strchr("iu", box->dtype.kind)) {
        int bits = (int)box->dtype.itemsize * 8;
        double lo = box->dtype.kind == 'u' ? 0 : -ldexp(1, bits - 1);
        double hi = box->dtype.kind == 'u' ? ldexp(1, bits) - 1 : ldexp(1, bits - 1) - 1;
        for (uint64_t i = 0; i < b->n; i++)
            if (!isfinite(b->v[i]) || b->v[i] < lo || b->v[i] > hi)
                return grr_fail(r, "%s: Box bound does not fit %s", where, box->dtype.str);
    }
    return 0;
}

int grr_check_space(grr_reader *r, json_t *desc, const char *where, int depth) {
    if (depth > GRR_MAX_NESTING) return grr_fail(r, "%s: spaces nested too deeply", where);
    const char *type = grr_string(json_object_get(desc, "type"));
    if (!json_is_object(desc) || !type) return 0; /* the layout has refused these already */
    if (!strcmp(type, "Box")) {
        int leaves = 0;
        grr_node *box = grr_layout(r, desc, where, "box", depth, &leaves);
        if (!box) return -1;
        uint64_t count = 1;
        for (int i = 0; i < box->ndim; i++) count *= box->shape[i];
        int rc = 0;
        bound_t low, high;
        memset(&low, 0, sizeof low);
        memset(&high, 0, sizeof high);
        if (count * box->dtype.itemsize > MAX_BOX_BOUND_BYTES)
            rc = grr_fail(r, "%s: Box of dtype %s is too large to rebuild", where,
                          box->dtype.str);
        if (rc == 0) rc = box_bound(r, box, json_object_get(desc, "low"), where, &low);
        if (rc == 0) rc = box_bound(r, box, json_object_get(desc, "high"), where, &high);
        for (uint64_t i = 0; rc == 0 && i < count && low.n && high.n; i++)
            if (low.v[low.n == 1 ? 0 : i] > high.v[high.n == 1 ? 0 : i])
                rc = grr_fail(r, "%s: cannot rebuild Box space (low > high)", where);
        free(low.v);
        free(high.v);
        grr_node_free(box);
        return rc;
    }
    if (!strcmp(type, "Discrete")) {
        json_t *n = json_object_get(desc, "n"), *start = json_object_get(desc, "start");
        if (!json_is_integer(n) || !json_is_integer(start))
            return grr_fail(r, "%s: space field 'n' or 'start' is missing or malformed", where);
        if (json_integer_value(n) <= 0)
            return grr_fail(r, "%s: cannot rebuild Discrete space (n <= 0)", where);
        return 0;
    }
    if (!strcmp(type, "Dict") || !strcmp(type, "Tuple") || !strcmp(type, "OneOf")) {
        json_t *subs = json_object_get(desc, "spaces");
        int dict = !strcmp(type, "Dict");
        for (size_t i = 0; i < json_array_size(subs); i++) {
            json_t *sub = json_array_get(subs, i);
            if (grr_check_space(r, dict ? json_array_get(sub, 1) : sub, where, depth + 1) < 0)
                return -1;
        }
        return 0;
    }
    if (!strcmp(type, "Sequence"))
        return grr_check_space(r, json_object_get(desc, "space"), where, depth + 1);
    if (!strcmp(type, "Graph")) {
        json_t *edge = json_object_get(desc, "edge_space");
        if (grr_check_space(r, json_object_get(desc, "node_space"), where, depth + 1) < 0)
            return -1;
        return edge && !json_is_null(edge) ? grr_check_space(r, edge, where, depth + 1) : 0;
    }
    return 0;
}
