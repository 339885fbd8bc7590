/* grr: an episode from its entries ("Batch", "Episodes of a recording", "Infos"). */
#include "grr_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- entries --------------------------------------------------------------------------- */

static int64_t batch_int(json_t *b, const char *key, int64_t dflt) {
    int64_t v;
    return grr_get_int(b, key, &v) ? v : dflt;
}

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
    int64_t starts = 0;
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
        else if (part == 0)
            starts++;
    }
    /* Episodes are numbered by the manifest's counts: one that disagrees would shift them. */
    if (rc == 0 && !w->legacy && starts != batch_int(info, "episodes", -1))
        rc = grr_fail(r, "%s: %lld entries start an episode, the manifest says %lld", fn,
                      (long long)starts, (long long)batch_int(info, "episodes", -1));
    if (rc < 0) {
        json_decref(doc);
        return -1;
    }
    w->docs[b] = *out = doc;
    return 0;
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
    if (!grr_get_int(e, "steps", &steps) || steps < 0 || (uint64_t)steps > GRR_MAX_DIM)
        return grr_fail(r, "%s: 'steps' must be an integer in [0, 2^48]", p->where);
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

/* True for a stored {"__type": "values", ...} object: an array leaf of a value outside its
   space's shape is stored so (see "Trees" in the spec), one VALUE a row. */
static int is_values_object(json_t *o) {
    const char *t = json_string_value(json_object_get(o, "__type"));
    return json_is_object(o) && t && !strcmp(t, "values");
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
    /* before the episode's arrays are allocated: a size the file cannot hold is refused */
    return check_bounds(&p->bin, ref, where, p->bin.bin);
}

static void collect_leaves(grr_node *n, grr_node **out) {
    if (n->kind == NODE_DICT || n->kind == NODE_TUPLE) {
        for (size_t i = 0; i < n->n; i++) collect_leaves(n->kids[i], out);
    } else {
        out[n->leaf] = n;
    }
}

static int check_slots(grr_reader *r, grr_writer *w, part_t *p) {
    static const char *cols[] = {"rewards", "terminations", "truncations"};
    static const char *types[] = {"<f8", "|b1", "|b1"};
    int n = w->n_obs + w->n_act;
    grr_node **leaves = calloc((size_t)n + 1, sizeof *leaves);
    if (!leaves) return grr_fail(r, "%s: out of memory", p->where);
    collect_leaves(w->obs, leaves);
    collect_leaves(w->act, leaves + w->n_obs);
    for (int k = 0; k < n; k++) {
        grr_node *leaf = leaves[k];
        if (leaf->kind != NODE_ARRAY) continue;
        if (is_values_object(p->leaves[k])) continue; /* outside its space: values */
        if (check_slot(r, p, p->leaves[k], leaf->name, k >= w->n_obs ? p->steps : p->rows, leaf,
                       NULL, &p->refs[k]) < 0) {
            free(leaves);
            return -1;
        }
    }
    free(leaves);
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
        size_t as_values = 0; /* parts storing an array leaf as values (outside the space) */
        for (size_t i = 0; leaf && leaf->kind == NODE_ARRAY && i < nparts; i++)
            as_values += is_values_object(parts[i].leaves[s]) ? 1 : 0;
        if (as_values && as_values < nparts) {
            rc = grr_fail(r, "%s %s: the episode's parts store the leaf both as arrays and as "
                             "values (a value outside the space); this reader does not join them",
                          parts[0].where, fd->name);
            break;
        }
        if (leaf && (leaf->kind == NODE_VALUES || as_values)) {
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
                if (rc == 0 && convert(&ref->dtype, tmp, &res, a->data + at, n) < 0)
                    rc = grr_fail(r, "%s: this part stores the leaf as %s, and %s (the dtype "
                                     "the episode's parts join in) would round some of its "
                                     "integers; this reader does not give such a leaf", where,
                                  ref->dtype.str, res.str);
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

