/* grread: list the episodes of a gym_recorder recording and dump their arrays.
 *
 *   grread [--verify] list DIR                 one JSON line per episode
 *   grread [--verify] dump DIR [INDEX [FIELD]] [--values]
 *                                              one JSON line per array: episode, field, dtype,
 *                                              shape, crc32 (zlib CRC-32 of the bytes), and with
 *                                              --values the elements in C order
 *
 * Exit status: 0 success, 1 a malformed recording or another error (one line on stderr), 2 a
 * usage error. Every episode listed or dumped is read and checked in full.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grr.h"

static const char USAGE[] =
    "usage: grread [--verify] list DIR\n"
    "       grread [--verify] dump DIR [INDEX [FIELD]] [--values]\n";

static double half_to_double(uint16_t h) {
    int e = (h >> 10) & 0x1F, m = h & 0x3FF;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

static json_t *float_json(double d) {
    if (isnan(d)) return json_string("nan");
    if (isinf(d)) return json_string(d > 0 ? "inf" : "-inf");
    return json_real(d);
}

/* The elements of an array in C order, as JSON; NULL (with *why) for dtypes not printable. */
static json_t *values(const grr_array *a, const char **why) {
    char order = a->dtype[0], kind = a->dtype[1];
    size_t n = a->itemsize;
    uint64_t count = n ? a->size / n : 0;
    json_t *out = json_array();
    for (uint64_t i = 0; out && i < count; i++) {
        const unsigned char *p = a->data + i * n;
        if (kind == 'U' || kind == 'S') {
            char *s = malloc(kind == 'U' ? n + 1 : n + 1);
            size_t len = 0;
            if (!s) break;
            for (size_t k = 0; k < n; k += kind == 'U' ? 4 : 1) {
                uint32_t c = kind == 'S' ? p[k]
                             : order == '>' ? (uint32_t)p[k] << 24 | (uint32_t)p[k + 1] << 16 |
                                                  (uint32_t)p[k + 2] << 8 | p[k + 3]
                                            : (uint32_t)p[k + 3] << 24 | (uint32_t)p[k + 2] << 16 |
                                                  (uint32_t)p[k + 1] << 8 | p[k];
                if (c == 0) continue; /* numpy strips trailing NULs; embedded ones are rare */
                if (c < 0x80) s[len++] = (char)c;
                else if (c < 0x800 && kind == 'U') {
                    s[len++] = (char)(0xC0 | c >> 6);
                    s[len++] = (char)(0x80 | (c & 0x3F));
                } else if (kind == 'U' && c < 0x10000) {
                    s[len++] = (char)(0xE0 | c >> 12);
                    s[len++] = (char)(0x80 | ((c >> 6) & 0x3F));
                    s[len++] = (char)(0x80 | (c & 0x3F));
                } else if (kind == 'U') {
                    s[len++] = (char)(0xF0 | c >> 18);
                    s[len++] = (char)(0x80 | ((c >> 12) & 0x3F));
                    s[len++] = (char)(0x80 | ((c >> 6) & 0x3F));
                    s[len++] = (char)(0x80 | (c & 0x3F));
                } else {
                    s[len++] = '?';
                }
            }
            json_t *str = json_stringn_nocheck(s, len);
            free(s);
            if (kind == 'S') {
                json_decref(str);
                json_t *bytes = json_array();
                for (size_t k = 0; k < n; k++) json_array_append_new(bytes, json_integer(p[k]));
                json_array_append_new(out, bytes);
            } else {
                json_array_append_new(out, str);
            }
            continue;
        }
        if (n > 8 && kind != 'c') break;
        unsigned char b[16];
        for (size_t k = 0; k < n; k++) b[k] = order == '>' ? p[n - 1 - k] : p[k];
        uint64_t u = 0;
        for (size_t k = 0; k < n && k < 8; k++) u |= (uint64_t)b[k] << (8 * k);
        json_t *v = NULL;
        if (kind == 'b') {
            v = json_boolean(u != 0);
        } else if (kind == 'i') {
            int64_t s = n < 8 && (u >> (8 * n - 1)) & 1 ? (int64_t)(u | (~0ull << (8 * n)))
                                                         : (int64_t)u;
            v = json_integer(s);
        } else if (kind == 'u') {
            v = u > INT64_MAX ? json_real((double)u) : json_integer((json_int_t)u);
        } else if (kind == 'f' && n == 2) {
            v = float_json(half_to_double((uint16_t)u));
        } else if (kind == 'f' && n == 4) {
            float f;
            uint32_t u32 = (uint32_t)u;
            memcpy(&f, &u32, 4);
            v = float_json(f);
        } else if (kind == 'f' && n == 8) {
            double d;
            memcpy(&d, &u, 8);
            v = float_json(d);
        } else if (kind == 'c' && (n == 8 || n == 16)) {
            double re, im;
            if (n == 8) {
                float fr, fi;
                unsigned char q[8];
                for (size_t k = 0; k < 8; k++) q[k] = order == '>' ? p[(k < 4 ? 3 - k : 11 - k)] : p[k];
                memcpy(&fr, q, 4);
                memcpy(&fi, q + 4, 4);
                re = fr;
                im = fi;
            } else {
                unsigned char q[16];
                for (size_t k = 0; k < 16; k++) q[k] = order == '>' ? p[(k < 8 ? 7 - k : 23 - k)] : p[k];
                memcpy(&re, q, 8);
                memcpy(&im, q + 8, 8);
            }
            v = json_pack("[oo]", float_json(re), float_json(im));
        } else {
            break;
        }
        json_array_append_new(out, v);
    }
    if (out && json_array_size(out) != count) {
        json_decref(out);
        *why = "values of this dtype are not printed; compare the crc32";
        return NULL;
    }
    return out;
}

static int print_line(json_t *line) {
    char *s = line ? json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(line);
    if (!s) return -1;
    puts(s);
    free(s);
    return 0;
}

static int dump_episode(const grr_episode *ep, const char *field, int with_values,
                        const char **why) {
    int found = 0;
    for (size_t i = 0; i < ep->nfields; i++) {
        const grr_field *f = &ep->fields[i];
        if (field && strcmp(field, f->name)) continue;
        found = 1;
        json_t *line = json_pack("{sIss}", "episode", (json_int_t)ep->index, "field", f->name);
        if (f->is_values) {
            json_error_t e;
            json_object_set_new(line, "values", json_loads(f->values_json, 0, &e));
        } else {
            const grr_array *a = &f->array;
            json_t *shape = json_array();
            for (int d = 0; d < a->ndim; d++)
                json_array_append_new(shape, json_integer((json_int_t)a->shape[d]));
            json_object_set_new(line, "dtype", json_string(a->dtype));
            json_object_set_new(line, "shape", shape);
            json_object_set_new(line, "crc32",
                                json_integer(grr_crc32(0, a->data, (size_t)a->size)));
            if (with_values) {
                json_t *v = values(a, why);
                if (!v) {
                    json_decref(line);
                    return -1;
                }
                json_object_set_new(line, "values", v);
            }
        }
        if (print_line(line) < 0) {
            *why = "out of memory";
            return -1;
        }
    }
    if (field && !found) {
        *why = "no such field (see grread dump DIR INDEX for the episode's fields)";
        return -1;
    }
    return 0;
}

static json_t *episode_line(const grr_episode *ep) {
    return json_pack("{sIsssIsisoso}", "index", (json_int_t)ep->index, "writer", ep->writer,
                     "steps", (json_int_t)ep->steps, "parts", ep->parts, "end",
                     ep->end ? json_string(ep->end) : json_null(), "seed",
                     ep->has_seed ? json_integer(ep->seed) : json_null());
}

int main(int argc, char **argv) {
    int verify = 0, with_values = 0;
    const char *args[4];
    int nargs = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--verify")) verify = 1;
        else if (!strcmp(argv[i], "--values")) with_values = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(USAGE, stdout);
            return 0;
        } else if (nargs < 4) args[nargs++] = argv[i];
        else {
            fputs(USAGE, stderr);
            return 2;
        }
    }
    int list = nargs == 2 && !strcmp(args[0], "list");
    int dump = nargs >= 2 && !strcmp(args[0], "dump");
    if (!list && !dump) {
        fputs(USAGE, stderr);
        return 2;
    }
    size_t first = 0, last = 0;
    int one = nargs >= 3;
    if (one) {
        char *end;
        unsigned long long i = strtoull(args[2], &end, 10);
        if (*end || !*args[2] || args[2][0] == '-') {
            fputs(USAGE, stderr);
            return 2;
        }
        first = (size_t)i;
    }
    grr_reader *r = grr_open(args[1], verify);
    if (grr_failed(r)) {
        fprintf(stderr, "grread: %s\n", grr_error(r));
        grr_close(r);
        return 1;
    }
    last = one ? first + 1 : grr_count(r);
    int status = 0;
    for (size_t i = first; i < last; i++) {
        grr_episode ep;
        const char *why = NULL;
        if (grr_episode_read(r, i, &ep) < 0) {
            fprintf(stderr, "grread: %s\n", grr_error(r));
            status = 1;
        } else if (list ? print_line(episode_line(&ep)) < 0
                        : dump_episode(&ep, nargs == 4 ? args[3] : NULL, with_values, &why) < 0) {
            fprintf(stderr, "grread: episode %zu: %s\n", i, why ? why : "out of memory");
            status = 1;
        }
        grr_episode_free(&ep);
        if (status) break;
    }
    grr_close(r);
    return status;
}
