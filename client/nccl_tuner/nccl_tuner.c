/* The plugin: NCCL's tuner ABI (v5, v4, v3) over the table of
 * nccl_tuner_table.h, and the thread's forced choice. Contract: nccl_tuner.h. */
#define _POSIX_C_SOURCE 200809L

#include "client/nccl_tuner/nccl_tuner.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/nccl_tuner/nccl_tuner_abi.h"
#include "client/nccl_tuner/nccl_tuner_table.h"

#define AT_EXPORT __attribute__((visibility("default")))

typedef struct {
  at_table table; /* constant after init, as are log and nnodes */
  at_nccl_logger_t log;
  uint64_t nnodes;            /* the communicator's; 0: unknown */
  atomic_int noted_unoffered; /* 1 once "not offered" was logged */
  atomic_int noted_unchecked; /* 1 once "channels not given" was logged */
} Context;

/* What init hands NCCL when it cannot allocate a context: steers nothing. */
static Context inert_context;

/* The calling thread's force (at_nccl_tuner_force). */
static _Thread_local struct {
  int set;
  int algo;
  int proto;
  int channels;
  int outcome;
} forced;

/* How many bytes of the table's path a log line shows, escaped. NCCL's
 * logger keeps 1024 bytes of a line, its own prefix included. */
#define LOGGED_PATH_BYTES 256

/* s as a log line may show it, into out[out_len]: printable ASCII kept and
 * every other byte written \xNN (a backslash kept as is, so that escaping
 * twice changes nothing), so that no string from the environment or a file
 * forges a line or hides text; past max_out bytes of that, "...(N bytes)"
 * with N the size of s. out_len must exceed max_out by 32. */
static void Escape(const char* s, size_t max_out, char* out, size_t out_len) {
  const size_t n = strlen(s);
  size_t o = 0;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = (unsigned char)s[i];
    char piece[8];
    size_t k = 1;
    if (c >= 0x20 && c <= 0x7e) {
      piece[0] = (char)c;
    } else {
      k = (size_t)snprintf(piece, sizeof piece, "\\x%02x", c);
    }
    if (o + k > max_out) {
      snprintf(out + o, out_len - o, "...(%zu bytes)", n);
      return;
    }
    memcpy(out + o, piece, k);
    o += k;
  }
  out[o] = '\0';
}

__attribute__((format(printf, 4, 5))) static void Log(at_nccl_logger_t log,
                                                      at_nccl_log_level_t level, int line,
                                                      const char* fmt, ...) {
  if (log == NULL) return;
  char raw[1024];
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  /* The path is escaped already; strerror's text is the locale's. */
  Escape(raw, sizeof msg - 32, msg, sizeof msg);
  log(level, AT_NCCL_LOG_FLAG_TUNING, __FILE__, line, "%s", msg);
}

static const char* Plural(uint64_t n) { return n == 1 ? "" : "s"; }

static void* Init(size_t nranks, size_t nnodes, at_nccl_logger_t log) {
  const char* path = getenv(AT_NCCL_TUNER_TABLE_ENV);
  if (path == NULL || path[0] == '\0') path = AT_NCCL_TUNER_DEFAULT_TABLE;
  Context* ctx = calloc(1, sizeof *ctx);
  if (ctx == NULL) {
    Log(log, AT_NCCL_LOG_WARN, __LINE__, "autotuned tuner: out of memory: NCCL's own choices");
    return &inert_context;
  }
  ctx->log = log;
  ctx->nnodes = nnodes;
  atomic_init(&ctx->noted_unoffered, 0);
  atomic_init(&ctx->noted_unchecked, 0);
  if (strcmp(path, AT_NCCL_TUNER_TABLE_OFF) == 0) {
    Log(log, AT_NCCL_LOG_INFO, __LINE__,
        "autotuned tuner: table off (" AT_NCCL_TUNER_TABLE_ENV "=" AT_NCCL_TUNER_TABLE_OFF
        "): NCCL's own choices, or the forced ones");
    return ctx;
  }
  char why[512] = "";
  const at_table_status status = at_table_load(path, nranks, nnodes, &ctx->table, why, sizeof why);
  char shown[LOGGED_PATH_BYTES + 32];
  Escape(path, LOGGED_PATH_BYTES, shown, sizeof shown);
  path = shown;
  switch (status) {
    case AT_TABLE_LOADED:
      Log(log, AT_NCCL_LOG_INFO, __LINE__,
          "autotuned tuner: %d of %d rows for %zu rank%s, %zu node%s from %s (identity %s)%s",
          ctx->table.n_rows, ctx->table.n_file_rows, nranks, Plural(nranks), nnodes, Plural(nnodes),
          path, ctx->table.identity, ctx->table.n_rows == 0 ? ": NCCL's own choices" : "");
      break;
    case AT_TABLE_MISSING:
      Log(log, AT_NCCL_LOG_INFO, __LINE__,
          "autotuned tuner: no table at %s (%s): NCCL's own choices", path, why);
      break;
    case AT_TABLE_REJECTED:
      Log(log, AT_NCCL_LOG_WARN, __LINE__,
          "autotuned tuner: table %s rejected: %s: NCCL's own choices", path, why);
      break;
  }
  return ctx;
}

static int ChannelsGiven(int channels) {
  return channels > 0 && channels <= AT_NCCL_TUNER_MAX_CHANNELS;
}

/* 1 if NCCL may run the call on an algorithm for which it takes a channel
 * count unchecked (at_table_channels_unchecked; an algorithm this library
 * does not know, of a later NCCL, counts as one), with *which that
 * algorithm: on several nodes (or unknown ones) when the call's table offers
 * one at all, on one node when one is NCCL's own pick (the offered entry of
 * least cost, the first of equal ones: nccl_tuner_abi.h). Also 1 without a
 * table (*which -1): NCCL's pick is unknown. */
static int MayRunUnchecked(float** cost_table, int num_algo, int num_proto, uint64_t nnodes,
                           int* which) {
  *which = -1;
  if (cost_table == NULL) return 1;
  const float* cost = (const float*)cost_table;
  int pick = -1;
  float least = 0.0f;
  for (int a = 0; a < num_algo; ++a) {
    const int unchecked = a >= AT_NCCL_ALGO_COUNT || at_table_channels_unchecked(a, nnodes);
    for (int p = 0; p < num_proto; ++p) {
      const float c = cost[(size_t)a * (size_t)num_proto + (size_t)p];
      if (!(c >= 0.0f)) continue;
      if (unchecked && nnodes != 1) {
        *which = a;
        return 1;
      }
      if (pick < 0 || c < least) {
        pick = a;
        least = c;
      }
    }
  }
  if (pick >= 0 && (pick >= AT_NCCL_ALGO_COUNT || at_table_channels_unchecked(pick, nnodes))) {
    *which = pick;
    return 1;
  }
  return 0;
}

/* Makes (algo, proto) the least cost of the call's table if NCCL offers it,
 * and sets the channels; 1 if applied, 0 if not offered or if NCCL might take
 * the channels unchecked for algo (nothing changed). */
static int Apply(float** cost_table, int num_algo, int num_proto, int algo, int proto, int channels,
                 uint64_t nnodes, int* n_channels) {
  if (cost_table == NULL || algo < 0 || proto < 0 || algo >= num_algo || proto >= num_proto) {
    return 0;
  }
  if (ChannelsGiven(channels) &&
      (algo >= AT_NCCL_ALGO_COUNT || at_table_channels_unchecked(algo, nnodes))) {
    return 0;
  }
  /* A contiguous float[num_algo][num_proto] (nccl_tuner_abi.h). */
  float* cost = (float*)cost_table + (size_t)algo * (size_t)num_proto + (size_t)proto;
  if (!(*cost >= 0.0f)) return 0;
  *cost = 0.0f;
  if (ChannelsGiven(channels) && n_channels != NULL) *n_channels = channels;
  return 1;
}

static void GetCollInfo(void* context, at_nccl_func_t func, size_t nbytes, float** cost_table,
                        int num_algo, int num_proto, int* n_channels) {
  Context* ctx = context;
  const uint64_t nnodes = ctx != NULL ? ctx->nnodes : 0;
  int which;
  if (forced.set) {
    if (forced.algo < 0) { /* channels only: NCCL's algorithm and protocol */
      if (MayRunUnchecked(cost_table, num_algo, num_proto, nnodes, &which)) {
        forced.outcome = -1;
        return;
      }
      if (n_channels != NULL) *n_channels = forced.channels;
      forced.outcome = 1;
      return;
    }
    forced.outcome = Apply(cost_table, num_algo, num_proto, forced.algo, forced.proto,
                           forced.channels, nnodes, n_channels)
                         ? 1
                         : -1;
    return;
  }
  if (ctx == NULL) return;
  const at_table_row* row = at_table_find(&ctx->table, (int)func, nbytes);
  if (row == NULL) return;
  if (row->algo < 0) {
    if (row->channels == 0 || n_channels == NULL) return;
    if (!MayRunUnchecked(cost_table, num_algo, num_proto, nnodes, &which)) {
      *n_channels = row->channels;
    } else if (atomic_exchange(&ctx->noted_unchecked, 1) == 0) {
      const char* name = at_table_algo_name(which);
      Log(ctx->log, AT_NCCL_LOG_INFO, __LINE__,
          "autotuned tuner: line %d (default/default, %d channels): NCCL may run %s%s for a "
          "call of %zu bytes, where it takes a channel count unchecked: NCCL's channels there "
          "(logged once per communicator)",
          row->line, row->channels, name != NULL ? name : "an algorithm unknown here",
          name != NULL && which == AT_NCCL_ALGO_NVLS ? " over several nodes" : "", nbytes);
    }
    return;
  }
  if (Apply(cost_table, num_algo, num_proto, row->algo, row->proto, row->channels, nnodes,
            n_channels)) {
    return;
  }
  if (atomic_exchange(&ctx->noted_unoffered, 1) == 0) {
    Log(ctx->log, AT_NCCL_LOG_INFO, __LINE__,
        "autotuned tuner: line %d (%s/%s) not offered by NCCL for a call of %zu bytes: NCCL's "
        "own choice there (logged once per communicator)",
        row->line, at_table_algo_name(row->algo), at_table_proto_name(row->proto), nbytes);
  }
}

static at_nccl_result_t Finalize(void* context) {
  Context* ctx = context;
  if (ctx != NULL && ctx != &inert_context) {
    at_table_free(&ctx->table);
    free(ctx);
  }
  return AT_NCCL_SUCCESS;
}

static at_nccl_result_t InitV5(void** context, uint64_t comm_id, size_t nranks, size_t nnodes,
                               at_nccl_logger_t log,
                               struct at_nccl_nvl_domain_info_v5* nvl_domain_info,
                               struct at_nccl_tuner_constants_v5* constants) {
  (void)comm_id;
  (void)nvl_domain_info;
  (void)constants;
  if (context != NULL) *context = Init(nranks, nnodes, log);
  return AT_NCCL_SUCCESS;
}

static at_nccl_result_t InitV3V4(size_t nranks, size_t nnodes, at_nccl_logger_t log,
                                 void** context) {
  if (context != NULL) *context = Init(nranks, nnodes, log);
  return AT_NCCL_SUCCESS;
}

static at_nccl_result_t GetCollInfoV4V5(void* context, at_nccl_func_t func, size_t nbytes,
                                        int num_pipe_ops, float** cost_table, int num_algo,
                                        int num_proto, int reg_buff, int* n_channels) {
  (void)num_pipe_ops;
  (void)reg_buff;
  GetCollInfo(context, func, nbytes, cost_table, num_algo, num_proto, n_channels);
  return AT_NCCL_SUCCESS;
}

static at_nccl_result_t GetCollInfoV3(void* context, at_nccl_func_t func, size_t nbytes,
                                      int num_pipe_ops, float** cost_table, int num_algo,
                                      int num_proto, int* n_channels) {
  (void)num_pipe_ops;
  GetCollInfo(context, func, nbytes, cost_table, num_algo, num_proto, n_channels);
  return AT_NCCL_SUCCESS;
}

AT_EXPORT const at_nccl_tuner_v5_t ncclTunerPlugin_v5 = {
    .name = "autotuned",
    .init = InitV5,
    .getCollInfo = GetCollInfoV4V5,
    .finalize = Finalize,
};

AT_EXPORT const at_nccl_tuner_v4_t ncclTunerPlugin_v4 = {
    .name = "autotuned",
    .init = InitV3V4,
    .getCollInfo = GetCollInfoV4V5,
    .destroy = Finalize,
};

AT_EXPORT const at_nccl_tuner_v3_t ncclTunerPlugin_v3 = {
    .name = "autotuned",
    .init = InitV3V4,
    .getCollInfo = GetCollInfoV3,
    .destroy = Finalize,
};

AT_EXPORT void at_nccl_tuner_force(int algo, int proto, int channels) {
  const int both = algo >= 0 && proto >= 0;
  forced.set = both || (channels > 0 && channels <= AT_NCCL_TUNER_MAX_CHANNELS);
  forced.algo = both ? algo : -1;
  forced.proto = both ? proto : -1;
  forced.channels = channels;
  forced.outcome = 0;
}

AT_EXPORT int at_nccl_tuner_forced_outcome(void) { return forced.outcome; }

AT_EXPORT const char* at_nccl_tuner_algo_name(int algo) { return at_table_algo_name(algo); }

AT_EXPORT const char* at_nccl_tuner_proto_name(int proto) { return at_table_proto_name(proto); }
