/* grr: a small reader of gym_recorder recordings (format version 1), written from the
 * specification in gym_recorder/format/__init__.py alone.
 *
 * Every function that can fail returns 0 on success and -1 on failure, with one line of text
 * naming the file and what is wrong in the reader's error buffer (grr_error()).
 */
#ifndef GRR_H
#define GRR_H

#include <stddef.h>
#include <stdint.h>

#define GRR_MAX_NDIM 32

typedef struct grr_reader grr_reader;

/* One stacked array of an episode (a leaf of observations or actions, or rewards,
 * terminations, truncations): the parts' bytes concatenated. */
typedef struct {
    char dtype[16];           /* numpy dtype.str, e.g. "<f4", "|u1", "<U7" */
    size_t itemsize;
    int ndim;
    uint64_t shape[GRR_MAX_NDIM];
    uint64_t size;            /* bytes */
    unsigned char *data;      /* size bytes, C order */
} grr_array;

/* One field of an episode: an array, or a leaf stored as JSON values (Text, Sequence, ...). */
typedef struct {
    char *name;               /* "observations", "observations/key", "actions/0", "rewards" */
    int is_values;            /* 1: values_json holds a JSON list, one VALUE a row */
    grr_array array;
    char *values_json;
} grr_field;

typedef struct {
    size_t index;             /* position in the reader */
    char *writer;             /* the writer's prefix */
    int64_t steps;
    int parts;
    char *end;                /* "terminated", ..., or NULL */
    int has_seed;
    int64_t seed;
    int has_sub_env;
    int64_t sub_env;
    size_t nfields;
    grr_field *fields;
} grr_episode;

/* Opens a recording directory (reads its manifests). verify: check every array's CRC-32. */
grr_reader *grr_open(const char *directory, int verify);
/* The last error, or the reason grr_open failed when given its (non-NULL) result. */
const char *grr_error(const grr_reader *r);
int grr_failed(const grr_reader *r);
size_t grr_count(const grr_reader *r);
/* Reads episode i (0 <= i < grr_count()) into *out; free it with grr_episode_free(). */
int grr_episode_read(grr_reader *r, size_t i, grr_episode *out);
void grr_episode_free(grr_episode *ep);
void grr_close(grr_reader *r);
/* zlib's CRC-32 (ISO-HDLC), continued from crc (0 to start). */
uint32_t grr_crc32(uint32_t crc, const unsigned char *data, size_t n);

#endif
