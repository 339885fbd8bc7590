/* grr: checksums, names, dtypes and files: the format's small rules ("JSON", "Arrays"). */
#include "grr_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int grr_fail(grr_reader *r, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->err, sizeof r->err, fmt, ap);
    va_end(ap);
    for (char *p = r->err; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    r->failed = 1;
    return -1;
}

uint32_t grr_crc32(uint32_t crc, const unsigned char *data, size_t n) {
    static uint32_t table[256];
    static int ready = 0;
    if (!ready) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
        ready = 1;
    }
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}

/* A plain file name: [A-Za-z0-9_][A-Za-z0-9_.-]{0,254} without "..". */
int grr_plain_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 255 || strstr(s, "..")) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '_' || (i > 0 && (c == '.' || c == '-'));
        if (!ok) return 0;
    }
    return 1;
}

static const struct { const char *name, *str; } DTYPE_NAMES[] = {
    {"bool", "|b1"},     {"int8", "|i1"},     {"int16", "<i2"},      {"int32", "<i4"},
    {"int64", "<i8"},    {"uint8", "|u1"},    {"uint16", "<u2"},     {"uint32", "<u4"},
    {"uint64", "<u8"},   {"float16", "<f2"},  {"float32", "<f4"},    {"float64", "<f8"},
    {"complex64", "<c8"}, {"complex128", "<c16"},
};

/* Parses a dtype string (numpy's dtype.str, or a legacy numpy name) into its normalised
 * dtype.str; refuses anything but b1, i/u 1-8, f2/4/8/16, c8/16/32, U<n>, S<n>. */
int grr_parse_dtype(const char *text, grr_dtype *out) {
    const char *s = text;
    char order = '<';
    for (size_t i = 0; i < sizeof DTYPE_NAMES / sizeof DTYPE_NAMES[0]; i++)
        if (strcmp(text, DTYPE_NAMES[i].name) == 0) {
            s = DTYPE_NAMES[i].str;
            break;
        }
    if (*s == '<' || *s == '>' || *s == '|' || *s == '=') {
        order = *s == '>' ? '>' : '<';
        s++;
    }
    char kind = *s++;
    if (!kind || !strchr("biufcUS", kind)) return -1;
    size_t len = strlen(s);
    if (len < 1 || len > 7) return -1;
    unsigned long n = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        n = n * 10 + (unsigned long)(s[i] - '0');
    }
    if (kind != 'U' && kind != 'S' && len > 2) return -1;
    switch (kind) {
    case 'b': if (n != 1) return -1; break;
    case 'i': case 'u': if (n != 1 && n != 2 && n != 4 && n != 8) return -1; break;
    case 'f': if (n != 2 && n != 4 && n != 8 && n != 16) return -1; break;
    case 'c': if (n != 8 && n != 16 && n != 32) return -1; break;
    default: if (n == 0) return -1; /* U0, S0: no item size */
    }
    out->kind = kind;
    out->itemsize = kind == 'U' ? n * 4 : n;
    if (out->itemsize == 1 || kind == 'S') order = '|';
    out->order = order;
    snprintf(out->str, sizeof out->str, "%c%c%lu", order, kind, n);
    return 0;
}

/* Opens a file of the recording: never through a symlink, a regular file, without blocking. */
int grr_open_regular(grr_reader *r, const char *name, int *fd_out, uint64_t *size_out) {
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", r->dir, name) >= sizeof path)
        return grr_fail(r, "%s: path too long", name);
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return grr_fail(r, "%s: cannot open (%s)", name, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return grr_fail(r, "%s: not a regular file", name);
    }
    *fd_out = fd;
    *size_out = (uint64_t)st.st_size;
    return 0;
}

int grr_pread_all(grr_reader *r, int fd, const char *name, uint64_t off, unsigned char *buf,
                  uint64_t size) {
    uint64_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, buf + got, (size_t)(size - got), (off_t)(off + got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0)
            return grr_fail(r, "%s: EOF reading array data, expected %llu bytes got %llu", name,
                            (unsigned long long)size, (unsigned long long)got);
        got += (uint64_t)n;
    }
    return 0;
}

/* Reads and parses a JSON file (at most GRR_MAX_JSON_BYTES; of expected_size unless < 0);
 * *crc gets the CRC-32 of its bytes. Strict JSON: jansson refuses NaN/Infinity and bad UTF-8. */
int grr_read_json(grr_reader *r, const char *name, int64_t expected_size, json_t **out,
                  uint32_t *crc) {
    int fd;
    uint64_t size;
    if (grr_open_regular(r, name, &fd, &size) < 0) return -1;
    if (size > GRR_MAX_JSON_BYTES) {
        close(fd);
        return grr_fail(r, "%s: %llu bytes of JSON is more than %llu", name,
                        (unsigned long long)size, (unsigned long long)GRR_MAX_JSON_BYTES);
    }
    if (expected_size >= 0 && size != (uint64_t)expected_size) {
        close(fd);
        return grr_fail(r, "%s: file has %llu bytes, the manifest says %lld", name,
                        (unsigned long long)size, (long long)expected_size);
    }
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        close(fd);
        return grr_fail(r, "%s: out of memory", name);
    }
    int rc = grr_pread_all(r, fd, name, 0, buf, size);
    close(fd);
    if (rc < 0) {
        free(buf);
        return grr_fail(r, "%s: file shorter than it was", name);
    }
    if (crc) *crc = grr_crc32(0, buf, size);
    json_error_t e;
    json_t *doc = json_loadb((const char *)buf, size, JSON_ALLOW_NUL, &e);
    free(buf);
    if (!doc) return grr_fail(r, "%s: not valid JSON (%s at line %d)", name, e.text, e.line);
    *out = doc;
    return 0;
}

/* An integer member: 1 and *v when key holds a JSON integer, else 0. */
int grr_get_int(json_t *obj, const char *key, int64_t *v) {
    json_t *x = json_object_get(obj, key);
    if (!json_is_integer(x)) return 0;
    *v = json_integer_value(x);
    return 1;
}

/* A JSON string without embedded NULs (as C sees it), else NULL. */
const char *grr_string(json_t *v) {
    const char *s = json_string_value(v);
    return s && strlen(s) == json_string_length(v) ? s : NULL;
}
