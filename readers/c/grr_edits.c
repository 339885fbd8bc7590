/* grr: the edit record (format version 2, "Edits"): which writers and episodes are shown. */
#include "grr_internal.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#define EDITS_MANIFEST "_edits.manifest.json"

/* "_edits." 9 to 18 digits ".json": the generation, or -1. */
static int64_t log_generation(const char *name) {
    const char *p = name + 7;
    size_t n = strlen(name), digits = 0;
    if (strncmp(name, "_edits.", 7) || n < 7 + 9 + 5 || strcmp(name + n - 5, ".json")) return -1;
    int64_t g = 0;
    for (; p < name + n - 5; p++, digits++) {
        if (*p < '0' || *p > '9' || digits >= 18) return -1;
        g = g * 10 + (*p - '0');
    }
    return digits >= 9 ? g : -1;
}

int grr_is_edits_manifest(const char *name) { return !strcmp(name, EDITS_MANIFEST); }

static int check_ranges(grr_reader *r, const char *where, const char *prefix, json_t *ranges) {
    if (!json_is_array(ranges)) return grr_fail(r, "%s deleted %s: must be a list", where, prefix);
    int64_t last = -1;
    for (size_t i = 0; i < json_array_size(ranges); i++) {
        json_t *p = json_array_get(ranges, i);
        json_t *a = json_array_get(p, 0), *b = json_array_get(p, 1);
        if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_integer(a) ||
            !json_is_integer(b) || json_integer_value(a) < 0 ||
            json_integer_value(a) >= json_integer_value(b) || json_integer_value(a) <= last)
            return grr_fail(r, "%s deleted %s range %zu: not a non-empty range after the "
                               "previous one", where, prefix, i);
        last = json_integer_value(b);
    }
    return 0;
}

int grr_load_edits(grr_reader *r) {
    DIR *d = opendir(r->dir);
    if (!d) return grr_fail(r, "%s: no recording directory", r->dir);
    struct dirent *e;
    int64_t best = -1;
    int tripwire = 0;
    while ((e = readdir(d))) {
        int64_t g = log_generation(e->d_name);
        if (g > best) best = g;
        if (grr_is_edits_manifest(e->d_name)) tripwire = 1;
    }
    closedir(d);
    if (tripwire) {
        json_t *doc;
        if (grr_read_json(r, EDITS_MANIFEST, -1, &doc, NULL) < 0) return -1;
        json_t *v = json_object_get(doc, "version");
        int ok = json_is_integer(v) && json_integer_value(v) == 2 &&
                 grr_string(json_object_get(doc, "prefix")) &&
                 !strcmp(grr_string(json_object_get(doc, "prefix")), "_edits");
        json_decref(doc);
        if (!ok) return grr_fail(r, "%s: not a gym_recorder edit record of version 2",
                                 EDITS_MANIFEST);
        if (best < 0)
            return grr_fail(r, "%s: the recording has edits, but its edit log is missing",
                            EDITS_MANIFEST);
    }
    if (best < 0) return 0;
    char name[64];
    snprintf(name, sizeof name, "_edits.%09lld.json", (long long)best);
    if (grr_read_json(r, name, -1, &r->edits, NULL) < 0) return -1;
    json_t *doc = r->edits, *v = json_object_get(doc, "version");
    int64_t g;
    if (!json_is_object(doc) || !json_is_integer(v) || json_integer_value(v) != 2 ||
        !grr_get_int(doc, "generation", &g) || g != best)
        return grr_fail(r, "%s: not an edit record of version 2 and this generation", name);
    const char *keys[] = {"deleted", "replaced", "pending"};
    for (int k = 0; k < 3; k++) {
        json_t *o = json_object_get(doc, keys[k]);
        if (o && !json_is_object(o)) return grr_fail(r, "%s: '%s' must be an object", name, keys[k]);
    }
    const char *prefix;
    json_t *value;
    json_object_foreach(json_object_get(doc, "deleted"), prefix, value)
        if (check_ranges(r, name, prefix, value) < 0) return -1;
    json_object_foreach(json_object_get(doc, "replaced"), prefix, value)
        if (!json_is_string(value)) return grr_fail(r, "%s: replaced %s: not a prefix", name, prefix);
    return 0;
}

/* Whether the edit state hides a writer whole (replaced, pending, or an uncommitted
 * compaction's output). */
int grr_edits_hide_writer(grr_reader *r, const grr_writer *w) {
    if (!r->edits) return w->doc && json_is_string(json_object_get(w->doc, "replaces"));
    if (json_object_get(json_object_get(r->edits, "replaced"), w->prefix)) return 1;
    if (json_object_get(json_object_get(r->edits, "pending"), w->prefix)) return 1;
    const char *replaces = w->doc ? grr_string(json_object_get(w->doc, "replaces")) : NULL;
    if (!replaces) return 0;
    const char *by = grr_string(json_object_get(json_object_get(r->edits, "replaced"), replaces));
    return !by || strcmp(by, w->prefix);
}

/* The writer's deleted ranges; sets w->shown. */
void grr_edits_apply(grr_reader *r, grr_writer *w) {
    w->deleted = r->edits ? json_object_get(json_object_get(r->edits, "deleted"), w->prefix) : NULL;
    w->shown = w->episodes;
    for (size_t i = 0; w->deleted && i < json_array_size(w->deleted); i++) {
        json_t *p = json_array_get(w->deleted, i);
        int64_t a = json_integer_value(json_array_get(p, 0));
        int64_t b = json_integer_value(json_array_get(p, 1));
        if (a >= w->episodes) break;
        w->shown -= (b < w->episodes ? b : w->episodes) - a;
    }
}

/* The writer's number of the episode shown at position pos. */
int64_t grr_edits_number(const grr_writer *w, int64_t pos) {
    int64_t number = pos;
    for (size_t i = 0; w->deleted && i < json_array_size(w->deleted); i++) {
        json_t *p = json_array_get(w->deleted, i);
        int64_t a = json_integer_value(json_array_get(p, 0));
        if (a > number) break;
        number += json_integer_value(json_array_get(p, 1)) - a;
    }
    return number;
}
