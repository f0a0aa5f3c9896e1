/* The tuner's table file (format: nccl_tuner.h, docs/nccl_tuner.md): read,
 * checked whole, and kept as the rows of one communicator's shape.
 * Internal to libautotuned_nccl_tuner.so; C. */
#ifndef AUTOTUNED_CLIENT_NCCL_TUNER_NCCL_TUNER_TABLE_H_
#define AUTOTUNED_CLIENT_NCCL_TUNER_NCCL_TUNER_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#define AT_TABLE_MAX_FILE_BYTES (1024 * 1024)
#define AT_TABLE_MAX_LINE_BYTES 512
#define AT_TABLE_MAX_ROWS 4096
#define AT_TABLE_MAX_IDENTITY 64
#define AT_TABLE_FUNCS 5 /* ncclFunc_t 0..4: the collectives a row names */

typedef struct {
  int func;     /* ncclFunc_t */
  int algo;     /* NCCL_ALGO_*, or -1 (default) */
  int proto;    /* NCCL_PROTO_*, or -1 (default); -1 exactly when algo is */
  int channels; /* 0..64, 0: NCCL's; else NCCL's channel limit for the call */
  int line;     /* in the file, from 1 */
  uint64_t nranks;
  uint64_t nnodes;
  uint64_t min_bytes; /* inclusive */
  uint64_t max_bytes; /* inclusive */
} at_table_row;

typedef struct {
  at_table_row* rows; /* the kept rows, by (func, min_bytes); owned */
  int n_rows;
  int n_file_rows;                    /* rows in the file, of any shape */
  int func_begin[AT_TABLE_FUNCS + 1]; /* rows of func f: [func_begin[f], func_begin[f + 1]) */
  char identity[AT_TABLE_MAX_IDENTITY + 1];
} at_table;

typedef enum {
  AT_TABLE_LOADED = 0,  /* *out holds the rows of (nranks, nnodes), maybe none */
  AT_TABLE_MISSING = 1, /* no file at the path (ENOENT); *out is empty */
  AT_TABLE_REJECTED = 2 /* unreadable or invalid; *out is empty */
} at_table_status;

/* Reads the file at path and keeps the rows for (nranks, nnodes). Rejects
 * a row with channels > 0 for which at_table_channels_unchecked holds, and a
 * file whose last line has no newline (a file cut short). Unless
 * LOADED, writes why (with the line, from 1, where there is one) into
 * why[why_len] and leaves *out empty. Waits on nothing but the read of a
 * regular file: anything else (a FIFO, a device) is rejected unread. */
at_table_status at_table_load(const char* path, uint64_t nranks, uint64_t nnodes, at_table* out,
                              char* why, size_t why_len);

/* The kept row of func whose [min_bytes, max_bytes] holds bytes, or NULL. */
const at_table_row* at_table_find(const at_table* table, int func, uint64_t bytes);

/* Frees the rows; *table is then empty. */
void at_table_free(at_table* table);

/* 1 when NCCL takes a tuner's channel count for algo as is instead of
 * bounding it by the communicator's channels: collnet_direct, collnet_chain,
 * and nvls over more than one node (NCCL's collnet path); there a count
 * above what the communicator has runs channels that were never set up.
 * nnodes 0: unknown, taken as more than one. */
int at_table_channels_unchecked(int algo, uint64_t nnodes);

/* NULL out of range. */
const char* at_table_algo_name(int algo);
const char* at_table_proto_name(int proto);

#endif /* AUTOTUNED_CLIENT_NCCL_TUNER_NCCL_TUNER_TABLE_H_ */
