/* grr: the directory and its manifests ("Overview", "Manifest", the order of writers). */
#include "grr_internal.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *grr_error(const grr_reader *r) { return r ? r->err : "out of memory"; }
int grr_failed(const grr_reader *r) { return !r || r->failed; }
size_t grr_count(const grr_reader *r) { return r->count; }

static void writer_free(grr_writer *w) {
    free(w->name);
    free(w->prefix);
    free(w->created);
    grr_node_free(w->obs);
    grr_node_free(w->act);
    free(w->batches);
    free(w->starts);
    if (w->docs)
        for (size_t i = 0; i < w->nbatches; i++) json_decref(w->docs[i]);
    free(w->docs);
    json_decref(w->doc);
}

void grr_close(grr_reader *r) {
    if (!r) return;
    for (size_t i = 0; i < r->nwriters; i++) writer_free(&r->writers[i]);
    free(r->writers);
    json_decref(r->edits);
    free(r->dir);
    free(r);
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

static int load_manifest(grr_reader *r, const char *name, grr_writer *w) {
    json_t *doc;
    w->name = strdup(name);
    if (!w->name) return grr_fail(r, "%s: out of memory", name);
    if (grr_read_json(r, name, -1, &doc, NULL) < 0) return -1;
    w->doc = doc;
    if (!json_is_object(doc)) return grr_fail(r, "%s: a manifest must be a JSON object", name);
    json_t *fmt = json_object_get(doc, "format"), *ver = json_object_get(doc, "version");
    w->legacy = !fmt && !ver;
    size_t plen = strlen(name) - strlen(GRR_MANIFEST_SUFFIX);
    if (w->legacy) {
        if (strncmp(name, GRR_LEGACY_PREFIX, strlen(GRR_LEGACY_PREFIX)))
            return grr_fail(r, "%s: no format/version and not a gym-recording manifest", name);
        w->prefix = strndup(name, plen);
        w->created = strdup("");
    } else {
        if (!json_is_string(fmt) || strcmp(json_string_value(fmt), "gym_recorder"))
            return grr_fail(r, "%s: format is not 'gym_recorder'", name);
        if (!json_is_integer(ver) || json_integer_value(ver) < 1)
            return grr_fail(r, "%s: bad format version", name);
        if (json_object_get(doc, "multiagent"))
            return grr_fail(r, "%s: a multi-agent (PettingZoo) recording; this reader reads "
                            "single-agent recordings only", name);
        if (json_integer_value(ver) > 2)
            return grr_fail(r, "%s: format version %lld is newer than this reader (2)", name,
                            (long long)json_integer_value(ver));
        const char *prefix = grr_string(json_object_get(doc, "prefix"));
        if (!prefix || strlen(prefix) != plen || strncmp(prefix, name, plen))
            return grr_fail(r, "%s: prefix does not match the file name", name);
        w->prefix = strdup(prefix);
        const char *created = json_string_value(json_object_get(doc, "created"));
        w->created = strdup(created ? created : "");
        char where[600];
        snprintf(where, sizeof where, "%s observation_space", name);
        w->obs = grr_layout(r, json_object_get(doc, "observation_space"), where, "observations",
                            0, &w->n_obs);
        if (!w->obs) return -1;
        snprintf(where, sizeof where, "%s action_space", name);
        w->act = grr_layout(r, json_object_get(doc, "action_space"), where, "actions", 0,
                            &w->n_act);
        if (!w->act) return -1;
    }
    if (!w->prefix || !w->created) return grr_fail(r, "%s: out of memory", name);
    json_t *batches = json_object_get(doc, "batches");
    if (!json_is_array(batches)) return grr_fail(r, "%s: 'batches' must be a list", name);
    size_t nb = json_array_size(batches);
    w->batches = calloc(nb ? nb : 1, sizeof *w->batches);
    w->starts = calloc(nb ? nb : 1, sizeof *w->starts);
    w->docs = calloc(nb ? nb : 1, sizeof *w->docs);
    if (!w->batches || !w->starts || !w->docs) return grr_fail(r, "%s: out of memory", name);
    w->nbatches = nb;
    int64_t count = 0, entries = 0;
    for (size_t i = 0; i < nb; i++) {
        json_t *b = json_array_get(batches, i);
        int64_t first, len, n;
        if (!json_is_object(b)) return grr_fail(r, "%s batch %zu: must be an object", name, i);
        if (!grr_get_int(b, "first", &first) || !grr_get_int(b, "len", &len) || first < 0 ||
            len < 0)
            return grr_fail(r, "%s batch %zu: 'first' and 'len' must be non-negative integers",
                            name, i);
        if ((uint64_t)len > GRR_MAX_JSON_BYTES || first > INT64_MAX - len)
            return grr_fail(r, "%s batch %zu: 'len' %lld entries cannot fit a batch JSON of at "
                               "most %llu bytes, or first + len is beyond 2^63 - 1", name, i,
                            (long long)len, (unsigned long long)GRR_MAX_JSON_BYTES);
        const char *fn = grr_string(json_object_get(b, "fn"));
        if (!fn || !grr_plain_name(fn))
            return grr_fail(r, "%s batch %zu: fn is not a plain file name in the directory",
                            name, i);
        if (w->legacy) {
            size_t pl = strlen(w->prefix);
            if (strncmp(fn, w->prefix, pl) || strncmp(fn + pl, ".ep", 3) ||
                !ends_with(fn, ".json"))
                return grr_fail(r, "%s batch %zu: fn '%s' is not a batch of this writer", name,
                                i, fn);
            n = len;
        } else {
            if (first < entries)
                return grr_fail(r, "%s batch %zu: first entry %lld overlaps the previous batch",
                                name, i, (long long)first);
            const char *bin = grr_string(json_object_get(b, "bin"));
            if (!bin || !grr_plain_name(bin))
                return grr_fail(r, "%s batch %zu: bin is not a plain file name", name, i);
            char stem[512];
            snprintf(stem, sizeof stem, "%s.ep%09lld", w->prefix, (long long)first);
            size_t sl = strlen(stem);
            if (strncmp(fn, stem, sl) || strcmp(fn + sl, ".json") || strncmp(bin, stem, sl) ||
                strcmp(bin + sl, ".bin"))
                return grr_fail(r, "%s batch %zu: fn/bin are not this writer's batch files "
                                   "%s.json/.bin", name, i, stem);
            static const char *keys[] = {"json_size", "bin_size", "steps", "json_crc32"};
            for (int k = 0; k < 4; k++) {
                int64_t v;
                if (!grr_get_int(b, keys[k], &v) || v < 0)
                    return grr_fail(r, "%s batch %zu: '%s' must be a non-negative integer",
                                    name, i, keys[k]);
            }
            if (!grr_get_int(b, "episodes", &n) || n < 0 || n > len)
                return grr_fail(r, "%s batch %zu: 'episodes' must be an integer in [0, len]",
                                name, i);
            int64_t json_size;
            grr_get_int(b, "json_size", &json_size);
            if (len > json_size)
                return grr_fail(r, "%s batch %zu: 'len' %lld entries cannot fit a batch JSON of "
                                   "%lld bytes", name, i, (long long)len, (long long)json_size);
        }
        entries = first + len;
        w->batches[i] = b;
        w->starts[i] = count;
        count += n;
    }
    w->episodes = count;
    return 0;
}

static int writer_order(const void *pa, const void *pb) {
    const grr_writer *a = pa, *b = pb;
    if (a->legacy != b->legacy) return a->legacy ? -1 : 1;
    int c = strcmp(a->created, b->created);
    return c ? c : strcmp(a->prefix, b->prefix);
}

static int by_name(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

grr_reader *grr_open(const char *directory, int verify) {
    grr_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->verify = verify;
    r->dir = strdup(directory);
    if (!r->dir) {
        grr_fail(r, "%s: out of memory", directory);
        return r;
    }
    DIR *d = opendir(directory);
    if (!d) {
        grr_fail(r, "%s: no recording directory", directory);
        return r;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int dfd = dirfd(d);
    while ((e = readdir(d))) {
        struct stat st;
        if (!ends_with(e->d_name, GRR_MANIFEST_SUFFIX) || grr_is_edits_manifest(e->d_name))
            continue;
        /* A manifest is a regular file; a symlink under a manifest's name is ignored. */
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 8;
            char **grown = realloc(names, cap * sizeof *names);
            if (!grown) break;
            names = grown;
        }
        names[n] = strdup(e->d_name);
        if (!names[n]) break;
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    grr_load_edits(r);
    r->writers = calloc(n ? n : 1, sizeof *r->writers);
    if (!r->writers) grr_fail(r, "%s: out of memory", directory);
    for (size_t i = 0; i < n && !r->failed; i++) {
        r->nwriters++;
        grr_writer *w = &r->writers[r->nwriters - 1];
        load_manifest(r, names[i], w);
        if (!r->failed && grr_edits_hide_writer(r, w)) {  /* replaced, pending: not shown */
            writer_free(w);
            memset(w, 0, sizeof *w);
            r->nwriters--;
        } else if (!r->failed) {
            grr_edits_apply(r, w);
        }
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    if (r->failed) return r;
    qsort(r->writers, r->nwriters, sizeof *r->writers, writer_order);
    /* The spaces of the first writer that describes them are the recording's: check them as a
     * reader that rebuilds them must. */
    for (size_t i = 0; i < r->nwriters; i++) {
        grr_writer *w = &r->writers[i];
        if (w->legacy) continue;
        char where[600];
        snprintf(where, sizeof where, "%s observation_space", w->name);
        if (grr_check_space(r, json_object_get(w->doc, "observation_space"), where, 0) < 0)
            return r;
        snprintf(where, sizeof where, "%s action_space", w->name);
        if (grr_check_space(r, json_object_get(w->doc, "action_space"), where, 0) < 0) return r;
        break;
    }
    for (size_t i = 0; i < r->nwriters; i++) r->count += (size_t)r->writers[i].shown;
    return r;
}

int grr_episode_read(grr_reader *r, size_t index, grr_episode *out) {
    memset(out, 0, sizeof *out);
    if (index >= r->count)
        return grr_fail(r, "%s: episode %zu out of range (%zu episodes)", r->dir, index,
                        r->count);
    size_t k = 0, start = 0;
    while (index >= start + (size_t)r->writers[k].shown) start += r->writers[k++].shown;
    out->index = index;
    return grr_episode_build(r, &r->writers[k],
                             grr_edits_number(&r->writers[k], (int64_t)(index - start)), out);
}

void grr_episode_free(grr_episode *ep) {
    free(ep->writer);
    free(ep->end);
    for (size_t i = 0; i < ep->nfields; i++) {
        free(ep->fields[i].name);
        free(ep->fields[i].array.data);
        free(ep->fields[i].values_json);
    }
    free(ep->fields);
    memset(ep, 0, sizeof *ep);
}
