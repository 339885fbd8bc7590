/* grr: OpenAI gym-recording ("legacy") episodes ("Version history"). */
#include "grr_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
            /* before allocating: a size the file cannot hold is refused */
            int rc = grr_open_regular(r, f.bin, &f.fd, &f.file_size);
            if (rc == 0) rc = check_bounds(&f, &ref, where, f.bin);
            if (rc == 0 && i == 0 && n > 1 && ref.size > UINT64_MAX / n)
                rc = grr_fail(r, "%s: %zu arrays of %llu bytes are too many to stack", where, n,
                              (unsigned long long)ref.size);
            if (rc < 0) {
                bin_close(&f);
                return -1;
            }
            if (i == 0) {
                snprintf(a->dtype, sizeof a->dtype, "%s", ref.dtype.str);
                a->itemsize = ref.dtype.itemsize;
                a->ndim = ref.ndim + stacked;
                if (stacked && a->ndim > GRR_MAX_NDIM)
                    rc = grr_fail(r, "%s: too many dimensions", where);
                a->shape[0] = n;
                if (rc == 0)
                    memcpy(a->shape + stacked, ref.shape, (size_t)ref.ndim * sizeof ref.shape[0]);
                a->size = ref.size * n;
                a->data = rc == 0 ? malloc(a->size ? a->size : 1) : NULL;
                if (rc == 0 && !a->data) rc = grr_fail(r, "%s: out of memory", where);
            } else if (strcmp(ref.dtype.str, a->dtype) || ref.ndim != a->ndim - 1 ||
                       memcmp(ref.shape, a->shape + 1, (size_t)ref.ndim * sizeof ref.shape[0])) {
                rc = grr_fail(r, "%s: per-step arrays of different shapes or dtypes (not "
                                 "supported by this reader)", where);
            }
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

