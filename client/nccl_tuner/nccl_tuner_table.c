#define _POSIX_C_SOURCE 200809L

#include "client/nccl_tuner/nccl_tuner_table.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FIELDS 8
#define MAX_DECIMAL 9223372036854775807ULL /* 2^63 - 1 */

static const char* const kAlgoNames[] = {
    "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat"};
static const char* const kProtoNames[] = {"ll", "ll128", "simple"};
/* Indexed by ncclFunc_t. */
static const char* const kFuncNames[AT_TABLE_FUNCS] = {"broadcast", "reduce", "all_gather",
                                                       "reduce_scatter", "all_reduce"};

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

const char* at_table_algo_name(int algo) {
  return algo >= 0 && algo < COUNT(kAlgoNames) ? kAlgoNames[algo] : NULL;
}

const char* at_table_proto_name(int proto) {
  return proto >= 0 && proto < COUNT(kProtoNames) ? kProtoNames[proto] : NULL;
}

/* NCCL_ALGO_* (nccl_tuner.h's AT_NCCL_ALGO_*, which this file does not
 * include: autotunectl links it alone). */
enum { kCollnetDirect = 2, kCollnetChain = 3, kNvls = 4 };

int at_table_channels_unchecked(int algo, uint64_t nnodes) {
  return algo == kCollnetDirect || algo == kCollnetChain || (algo == kNvls && nnodes != 1);
}

static int Lookup(const char* const* names, int n, const char* word) {
  for (int i = 0; i < n; ++i) {
    if (strcmp(names[i], word) == 0) return i;
  }
  return -1;
}

__attribute__((format(printf, 4, 5))) static void Why(char* why, size_t why_len, int line,
                                                      const char* fmt, ...) {
  if (why == NULL || why_len == 0) return;
  int n = line > 0 ? snprintf(why, why_len, "line %d: ", line) : 0;
  if (n < 0 || (size_t)n >= why_len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why + n, why_len - (size_t)n, fmt, ap);
  va_end(ap);
}

/* A decimal integer of digits only, at most 2^63 - 1. */
static int ParseDecimal(const char* s, uint64_t* out) {
  if (*s == '\0') return 0;
  uint64_t v = 0;
  for (; *s != '\0'; ++s) {
    if (*s < '0' || *s > '9') return 0;
    unsigned d = (unsigned)(*s - '0');
    if (v > (MAX_DECIMAL - d) / 10) return 0;
    v = v * 10 + d;
  }
  *out = v;
  return 1;
}

static int IsIdentity(const char* s) {
  size_t n = strlen(s);
  if (n < 1 || n > AT_TABLE_MAX_IDENTITY) return 0;
  for (; *s != '\0'; ++s) {
    if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f'))) return 0;
  }
  return 1;
}

/* Splits line (NUL-terminated, modified) at spaces and tabs. Returns the
 * number of fields, MAX_FIELDS + 1 when there are more. */
static int Split(char* line, char* fields[MAX_FIELDS]) {
  int n = 0;
  char* p = line;
  for (;;) {
    while (*p == ' ' || *p == '\t') ++p;
    if (*p == '\0') return n;
    if (n == MAX_FIELDS) return MAX_FIELDS + 1;
    fields[n++] = p;
    while (*p != '\0' && *p != ' ' && *p != '\t') ++p;
    if (*p != '\0') *p++ = '\0';
  }
}

/* One row's fields into *row; 0 and why on the first bad field. */
static int ParseRow(char* const f[MAX_FIELDS], int line, at_table_row* row, char* why,
                    size_t why_len) {
  row->line = line;
  row->func = Lookup(kFuncNames, AT_TABLE_FUNCS, f[0]);
  if (row->func < 0) {
    Why(why, why_len, line,
        "collective '%s' is not all_reduce, all_gather, reduce_scatter, broadcast or reduce", f[0]);
    return 0;
  }
  if (!ParseDecimal(f[1], &row->nranks) || row->nranks < 1) {
    Why(why, why_len, line, "nranks '%s' is not an integer from 1 to 2^63-1", f[1]);
    return 0;
  }
  if (!ParseDecimal(f[2], &row->nnodes) || row->nnodes < 1) {
    Why(why, why_len, line, "nnodes '%s' is not an integer from 1 to 2^63-1", f[2]);
    return 0;
  }
  if (!ParseDecimal(f[3], &row->min_bytes)) {
    Why(why, why_len, line, "min_bytes '%s' is not an integer from 0 to 2^63-1", f[3]);
    return 0;
  }
  if (!ParseDecimal(f[4], &row->max_bytes)) {
    Why(why, why_len, line, "max_bytes '%s' is not an integer from 0 to 2^63-1", f[4]);
    return 0;
  }
  if (row->min_bytes > row->max_bytes) {
    Why(why, why_len, line, "min_bytes %s is more than max_bytes %s", f[3], f[4]);
    return 0;
  }
  int algo_default = strcmp(f[5], "default") == 0;
  row->algo = algo_default ? -1 : Lookup(kAlgoNames, COUNT(kAlgoNames), f[5]);
  if (!algo_default && row->algo < 0) {
    Why(why, why_len, line,
        "algo '%s' is not tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat or "
        "default",
        f[5]);
    return 0;
  }
  int proto_default = strcmp(f[6], "default") == 0;
  row->proto = proto_default ? -1 : Lookup(kProtoNames, COUNT(kProtoNames), f[6]);
  if (!proto_default && row->proto < 0) {
    Why(why, why_len, line, "proto '%s' is not ll, ll128, simple or default", f[6]);
    return 0;
  }
  if (algo_default != proto_default) {
    Why(why, why_len, line, "algo '%s' and proto '%s': both or neither must be default", f[5],
        f[6]);
    return 0;
  }
  uint64_t channels = 0;
  if (!ParseDecimal(f[7], &channels) || channels > 64) {
    Why(why, why_len, line, "channels '%s' is not an integer from 0 to 64", f[7]);
    return 0;
  }
  if (channels > 0 && at_table_channels_unchecked(row->algo, row->nnodes)) {
    Why(why, why_len, line,
        "channels %s with %s%s%s%s: NCCL takes the count unchecked there (0 leaves it to NCCL)",
        f[7], f[5], row->algo == kNvls ? " over " : "", row->algo == kNvls ? f[2] : "",
        row->algo == kNvls ? " nodes" : "");
    return 0;
  }
  row->channels = (int)channels;
  return 1;
}

/* By shape, then bytes; the file's order breaks ties. */
static int CompareRows(const void* a, const void* b) {
  const at_table_row* x = a;
  const at_table_row* y = b;
#define AT_CMP(field) \
  if (x->field != y->field) return x->field < y->field ? -1 : 1
  AT_CMP(func);
  AT_CMP(nranks);
  AT_CMP(nnodes);
  AT_CMP(min_bytes);
  AT_CMP(line);
#undef AT_CMP
  return 0;
}

/* Rows sorted by CompareRows: 1 if no two of one shape share a byte. */
static int NoOverlap(const at_table_row* rows, int n, char* why, size_t why_len) {
  for (int i = 1; i < n; ++i) {
    const at_table_row* a = &rows[i - 1];
    const at_table_row* b = &rows[i];
    if (a->func != b->func || a->nranks != b->nranks || a->nnodes != b->nnodes) continue;
    /* The earlier rows of the shape are disjoint and a starts last, so a
     * ends last: b overlaps one of them exactly when it overlaps a. */
    if (b->min_bytes <= a->max_bytes) {
      const at_table_row* later = a->line > b->line ? a : b;
      const at_table_row* other = later == a ? b : a;
      Why(why, why_len, later->line,
          "bytes %llu..%llu overlap line %d (%llu..%llu) for %s of %llu ranks, %llu nodes",
          (unsigned long long)later->min_bytes, (unsigned long long)later->max_bytes, other->line,
          (unsigned long long)other->min_bytes, (unsigned long long)other->max_bytes,
          kFuncNames[a->func], (unsigned long long)a->nranks, (unsigned long long)a->nnodes);
      return 0;
    }
  }
  return 1;
}

/* Checks every line of text[size] and appends its rows to rows[]. */
static int ParseText(const char* text, size_t size, at_table_row* rows, int* n_rows, char* identity,
                     char* why, size_t why_len) {
  char buf[AT_TABLE_MAX_LINE_BYTES + 1];
  char* f[MAX_FIELDS];
  int line = 0;
  *n_rows = 0;
  identity[0] = '\0';
  if (size == 0) {
    Why(why, why_len, 1, "empty file, expected 'autotuned-nccl-table 1'");
    return 0;
  }
  for (size_t pos = 0; pos < size;) {
    ++line;
    const char* start = text + pos;
    const char* nl = memchr(start, '\n', size - pos);
    size_t len = nl ? (size_t)(nl - start) : size - pos;
    pos += len + (nl ? 1 : 0);
    if (nl == NULL) {
      Why(why, why_len, line, "no newline at its end (a file cut short?)");
      return 0;
    }
    if (len > AT_TABLE_MAX_LINE_BYTES) {
      Why(why, why_len, line, "longer than %d bytes", AT_TABLE_MAX_LINE_BYTES);
      return 0;
    }
    for (size_t i = 0; i < len; ++i) {
      unsigned char c = (unsigned char)start[i];
      if (c != '\t' && (c < 0x20 || c > 0x7e)) {
        Why(why, why_len, line, "byte 0x%02x at column %zu is not printable ASCII", c, i + 1);
        return 0;
      }
    }
    memcpy(buf, start, len);
    buf[len] = '\0';
    int n = Split(buf, f);
    if (line == 1) {
      if (n != 2 || strcmp(f[0], "autotuned-nccl-table") != 0) {
        Why(why, why_len, line, "expected 'autotuned-nccl-table 1' (not a table file)");
        return 0;
      }
      if (strcmp(f[1], "1") != 0) {
        Why(why, why_len, line, "version '%s' is not 1, the one this library reads", f[1]);
        return 0;
      }
      continue;
    }
    if (n == 0 || f[0][0] == '#') continue;
    if (strcmp(f[0], "identity") == 0) {
      if (identity[0] != '\0') {
        Why(why, why_len, line, "a second identity line");
        return 0;
      }
      if (n != 2 || !IsIdentity(f[1])) {
        Why(why, why_len, line, "identity: expected 'identity <1-64 of [0-9a-f]>'");
        return 0;
      }
      strcpy(identity, f[1]);
      continue;
    }
    if (identity[0] == '\0') {
      Why(why, why_len, line, "expected 'identity <1-64 of [0-9a-f]>' before the rows");
      return 0;
    }
    if (n != MAX_FIELDS) {
      Why(why, why_len, line,
          "%s%d fields, expected 8: collective nranks nnodes min_bytes max_bytes algo proto "
          "channels",
          n > MAX_FIELDS ? "more than " : "", n > MAX_FIELDS ? MAX_FIELDS : n);
      return 0;
    }
    if (*n_rows == AT_TABLE_MAX_ROWS) {
      Why(why, why_len, line, "more than %d rows", AT_TABLE_MAX_ROWS);
      return 0;
    }
    if (!ParseRow(f, line, &rows[*n_rows], why, why_len)) return 0;
    ++*n_rows;
  }
  if (identity[0] == '\0') {
    Why(why, why_len, line, "no identity line (expected 'identity <1-64 of [0-9a-f]>')");
    return 0;
  }
  return 1;
}

/* The whole regular file at path into a new buffer (*text, *size). */
static at_table_status ReadFile(const char* path, char** text, size_t* size, char* why,
                                size_t why_len) {
  *text = NULL;
  *size = 0;
  /* O_NONBLOCK: opening a FIFO does not wait for a writer. */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    int err = errno;
    char msg[128];
    if (strerror_r(err, msg, sizeof msg) != 0) snprintf(msg, sizeof msg, "errno %d", err);
    Why(why, why_len, 0, "%s", msg);
    return err == ENOENT ? AT_TABLE_MISSING : AT_TABLE_REJECTED;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    Why(why, why_len, 0, "not a regular file");
    close(fd);
    return AT_TABLE_REJECTED;
  }
  if (st.st_size > AT_TABLE_MAX_FILE_BYTES) {
    Why(why, why_len, 0, "%lld bytes, more than 1 MiB", (long long)st.st_size);
    close(fd);
    return AT_TABLE_REJECTED;
  }
  /* One byte more than allowed, to see a file that grew since fstat. */
  char* buf = malloc(AT_TABLE_MAX_FILE_BYTES + 1);
  if (buf == NULL) {
    Why(why, why_len, 0, "out of memory");
    close(fd);
    return AT_TABLE_REJECTED;
  }
  size_t got = 0;
  while (got <= AT_TABLE_MAX_FILE_BYTES) {
    ssize_t r = read(fd, buf + got, AT_TABLE_MAX_FILE_BYTES + 1 - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      Why(why, why_len, 0, "read failed (errno %d)", errno);
      free(buf);
      close(fd);
      return AT_TABLE_REJECTED;
    }
    if (r == 0) break;
    got += (size_t)r;
  }
  close(fd);
  if (got > AT_TABLE_MAX_FILE_BYTES) {
    Why(why, why_len, 0, "more than 1 MiB");
    free(buf);
    return AT_TABLE_REJECTED;
  }
  *text = buf;
  *size = got;
  return AT_TABLE_LOADED;
}

at_table_status at_table_load(const char* path, uint64_t nranks, uint64_t nnodes, at_table* out,
                              char* why, size_t why_len) {
  memset(out, 0, sizeof *out);
  char* text;
  size_t size;
  at_table_status status = ReadFile(path, &text, &size, why, why_len);
  if (status != AT_TABLE_LOADED) return status;
  at_table_row* rows = malloc(sizeof(at_table_row) * AT_TABLE_MAX_ROWS);
  if (rows == NULL) {
    Why(why, why_len, 0, "out of memory");
    free(text);
    return AT_TABLE_REJECTED;
  }
  int n = 0;
  int ok = ParseText(text, size, rows, &n, out->identity, why, why_len);
  free(text);
  if (ok) {
    qsort(rows, (size_t)n, sizeof *rows, CompareRows);
    ok = NoOverlap(rows, n, why, why_len);
  }
  if (!ok) {
    free(rows);
    memset(out, 0, sizeof *out);
    return AT_TABLE_REJECTED;
  }
  /* Keep this shape's rows, in place: still by (func, min_bytes). */
  int kept = 0;
  for (int i = 0; i < n; ++i) {
    if (rows[i].nranks == nranks && rows[i].nnodes == nnodes) rows[kept++] = rows[i];
  }
  for (int f = 0, i = 0; f <= AT_TABLE_FUNCS; ++f) {
    while (i < kept && rows[i].func < f) ++i;
    out->func_begin[f] = i;
  }
  out->n_file_rows = n;
  out->n_rows = kept;
  if (kept == 0) {
    free(rows);
    rows = NULL;
  }
  out->rows = rows;
  return AT_TABLE_LOADED;
}

const at_table_row* at_table_find(const at_table* table, int func, uint64_t bytes) {
  if (table == NULL || table->rows == NULL || func < 0 || func >= AT_TABLE_FUNCS) return NULL;
  /* The last row of func starting at or below bytes. */
  int lo = table->func_begin[func];
  int hi = table->func_begin[func + 1];
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (table->rows[mid].min_bytes <= bytes) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  if (lo == table->func_begin[func]) return NULL;
  const at_table_row* row = &table->rows[lo - 1];
  return bytes <= row->max_bytes ? row : NULL;
}

void at_table_free(at_table* table) {
  if (table == NULL) return;
  free(table->rows);
  memset(table, 0, sizeof *table);
}
