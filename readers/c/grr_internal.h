/* grr's internals, shared by its source files. */
#ifndef GRR_INTERNAL_H
#define GRR_INTERNAL_H

#include <jansson.h>

#include "grr.h"

#define GRR_ALIGNMENT 8
#define GRR_MAX_JSON_BYTES (1ull << 28)
#define GRR_MAX_NESTING 64
#define GRR_MAX_DIM (1ull << 48)
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
} grr_writer;

struct grr_reader {
    char *dir;
    int verify;
    int failed;
    char err[1024];
    size_t nwriters;
    grr_writer *writers;
    size_t count;
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

#endif
