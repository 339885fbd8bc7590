/* grr's internals, shared by its source files. */
#ifndef GRR_INTERNAL_H
#define GRR_INTERNAL_H

#include <jansson.h>

#include "grr.h"

#define GRR_ALIGNMENT 8
#define GRR_MAX_JSON_BYTES (1ull << 28)
#define GRR_MAX_NESTING 64
#define GRR_MAX_DIM (1ull << 48)
#define GRR_MAX_CHUNK_ROWS 65536
#define GRR_MAX_CHUNK_BYTES (1ull << 28)
#define GRR_MAX_ZSTD_RATIO 32768ull
#define GRR_MANIFEST_SUFFIX ".manifest.json"
#define GRR_LEGACY_PREFIX "openaigym.trace."

typedef struct {
    char str[16];     /* normalised numpy dtype.str */
    char kind;        /* b i u f c U S */
    char order;       /* < > | */
    size_t itemsize;
} grr_dtype;

/* A node of a space's layout: a leaf that stacks (array), a leaf of VALUEs, a Dict or a Tuple. */
enum { NODE_ARRAY, NODE_VALUES, NODE_DICT, NODE_TUPLE };
typedef struct grr_node {
    int kind;
    int leaf;                 /* leaf number (leaves) */
    int text;                 /* a Text leaf: rows must be strings */
    grr_dtype dtype;          /* array leaves */
    int ndim;
    uint64_t shape[GRR_MAX_NDIM];
    size_t n;                 /* Dict/Tuple children */
    char **keys;              /* Dict keys */
    struct grr_node **kids;
    char *name;               /* leaves: field name */
} grr_node;

typedef struct {
    char *name;               /* manifest file name */
    char *prefix;
    char *created;
    int legacy;
    json_t *doc;
    grr_node *obs, *act;
    int n_obs, n_act;         /* leaves */
    size_t nbatches;
    json_t **batches;         /* the manifest's BATCH objects (borrowed from doc) */
    int64_t *starts;          /* episode number of each batch's first new episode */
    int64_t episodes;
    json_t **docs;            /* parsed batch files, loaded on first use */
    json_t *deleted;          /* the edit record's deleted ranges (borrowed), or NULL */
    int64_t shown;            /* episodes shown (not deleted by an edit) */
} grr_writer;

struct grr_reader {
    char *dir;
    int verify;
    int failed;
    char err[1024];
    size_t nwriters;
    grr_writer *writers;
    size_t count;
    json_t *edits;            /* the newest edit log generation, or NULL */
};

int grr_fail(grr_reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int grr_plain_name(const char *s);
int grr_parse_dtype(const char *text, grr_dtype *out);
int grr_open_regular(grr_reader *r, const char *name, int *fd, uint64_t *size);
int grr_pread_all(grr_reader *r, int fd, const char *name, uint64_t off, unsigned char *buf,
                  uint64_t size);
int grr_read_json(grr_reader *r, const char *name, int64_t expected_size, json_t **out,
                  uint32_t *crc);
int grr_get_int(json_t *obj, const char *key, int64_t *v);

/* grr_edits.c */
int grr_is_edits_manifest(const char *name);
int grr_load_edits(grr_reader *r);
int grr_edits_hide_writer(grr_reader *r, const grr_writer *w);
void grr_edits_apply(grr_reader *r, grr_writer *w);
int64_t grr_edits_number(const grr_writer *w, int64_t pos);
const char *grr_string(json_t *v);

/* grr_layout.c */
grr_node *grr_layout(grr_reader *r, json_t *desc, const char *where, const char *name,
                     int depth, int *leaves);
void grr_node_free(grr_node *n);
int grr_check_space(grr_reader *r, json_t *desc, const char *where, int depth);
int grr_tree_leaves(grr_reader *r, const grr_node *n, json_t *tree, const char *where,
                    json_t **out);

/* grr_episode.c */
int grr_episode_build(grr_reader *r, grr_writer *w, int64_t number, grr_episode *ep);

/* grr_array.c: array references and the .bin files they point into ("Arrays") */
#define GRR_MAX_CODE_POINT 0x10FFFFu
typedef struct {
    grr_dtype dtype;
    int ndim;
    uint64_t shape[GRR_MAX_NDIM];
    uint64_t offset, size;
    int has_crc;
    uint32_t crc;
    int coded;                /* version 2: zstd chunks (see "Compressed arrays") */
    uint64_t stored;          /* bytes in the file at offset (== size when raw) */
    uint64_t chunk_rows;
    int delta;                /* 0 none, 1 xor, 2 sub */
} ref_t;

/* The .bin file of one entry's batch, opened on first use. */
typedef struct {
    grr_reader *r;
    const char *bin;          /* file name; NULL: legacy (each reference names its file) */
    int64_t bin_size;         /* the manifest's; -1: not known */
    int fd;
    uint64_t file_size;
} bin_t;

#define bin_open grr_bin_open
#define bin_close grr_bin_close
#define is_ref grr_is_ref
#define parse_ref grr_parse_ref
#define check_bounds grr_check_bounds
#define read_ref grr_read_ref
#define check_codes grr_check_codes
#define check_value grr_check_value
#define result_dtype grr_result_dtype
#define convert grr_convert
int bin_open(bin_t *f);
void bin_close(bin_t *f);
int is_ref(json_t *o);
int parse_ref(grr_reader *r, json_t *o, const char *where, int aligned, const char *file,
              ref_t *ref);
int check_codes(grr_reader *r, const ref_t *ref, const unsigned char *p, uint64_t n,
                const char *where);
int check_bounds(bin_t *f, const ref_t *ref, const char *where, const char *name);
int read_ref(bin_t *f, const ref_t *ref, const char *where, const char *name,
             unsigned char *dest);
/* numpy's result_type of two dtypes, for the mixes the format allows; -1 for others */
int result_dtype(const grr_dtype *a, const grr_dtype *b, grr_dtype *out);
int convert(const grr_dtype *from, const unsigned char *src, const grr_dtype *to,
            unsigned char *dst, uint64_t n);

/* grr_value.c: VALUEs ("Values"); *hashable: whether the value could be a dict key */
int check_value(bin_t *f, json_t *v, const char *where, int depth, int *hashable);

/* grr_legacy.c */
int grr_legacy_episode(grr_reader *r, grr_writer *w, size_t b, json_t *entry, const char *fn,
                       size_t pos, grr_episode *ep);

#endif
