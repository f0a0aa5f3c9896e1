/* The part of NCCL's tuner-plugin ABI that libautotuned_nccl_tuner.so
 * implements, declared here so that no NCCL header is needed to build it.
 *
 * Names are ours (at_nccl_*) so that this header and nccl.h can meet in one
 * translation unit; layouts, values and signatures are NCCL's, from NCCL
 * 2.28.3: src/include/plugin/tuner/tuner_v{3,4,5}.h (the structs),
 * src/include/nccl_common.h (ncclFunc_t, ncclDebugLogger_t and its levels
 * and subsystems), src/include/plugin/nccl_tuner.h (NCCL_ALGO_*,
 * NCCL_PROTO_*, NCCL_ALGO_PROTO_IGNORE) and nccl.h (ncclResult_t).
 *
 * The cost table: NCCL passes a contiguous float[numAlgo][numProto] cast to
 * float** (src/enqueue.cc, getAlgoInfo), so entry [a][p] is
 * ((float*)table)[a * numProto + p], not table[a][p]. An entry < 0
 * (NCCL_ALGO_PROTO_IGNORE, -1.0) is a combination NCCL does not offer for the
 * call; NCCL then runs the offered entry of least cost (the first of equal
 * ones, algorithm-major).
 *
 * Private to this package: the library itself and its test. */
#ifndef AUTOTUNED_CLIENT_NCCL_TUNER_NCCL_TUNER_ABI_H_
#define AUTOTUNED_CLIENT_NCCL_TUNER_NCCL_TUNER_ABI_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ncclResult_t: the plugin only ever returns success. */
typedef enum { AT_NCCL_SUCCESS = 0 } at_nccl_result_t;

/* ncclFunc_t (NCCL's values; the tuner is asked about the first five). */
typedef enum {
  AT_NCCL_FUNC_BROADCAST = 0,
  AT_NCCL_FUNC_REDUCE = 1,
  AT_NCCL_FUNC_ALL_GATHER = 2,
  AT_NCCL_FUNC_REDUCE_SCATTER = 3,
  AT_NCCL_FUNC_ALL_REDUCE = 4,
  AT_NCCL_FUNC_COUNT = 5
} at_nccl_func_t;

/* ncclDebugLogLevel, and the ncclDebugLogSubSys flag the plugin logs under. */
typedef enum {
  AT_NCCL_LOG_NONE = 0,
  AT_NCCL_LOG_VERSION = 1,
  AT_NCCL_LOG_WARN = 2,
  AT_NCCL_LOG_INFO = 3,
  AT_NCCL_LOG_ABORT = 4,
  AT_NCCL_LOG_TRACE = 5
} at_nccl_log_level_t;
#define AT_NCCL_LOG_FLAG_TUNING 0x40UL

/* ncclDebugLogger_t. NULL is allowed (nothing is logged). */
typedef void (*at_nccl_logger_t)(at_nccl_log_level_t level, unsigned long flags, const char* file,
                                 int line, const char* fmt, ...);

/* ncclNvlDomainInfo_v5_t and ncclTunerConstants_v5_t: passed by pointer,
 * never read or written by this plugin, hence incomplete here. */
struct at_nccl_nvl_domain_info_v5;
struct at_nccl_tuner_constants_v5;

/* ncclTuner_v5_t (NCCL 2.28 and later): exported as ncclTunerPlugin_v5. */
typedef struct {
  const char* name;
  at_nccl_result_t (*init)(void** context, uint64_t comm_id, size_t n_ranks, size_t n_nodes,
                           at_nccl_logger_t log, struct at_nccl_nvl_domain_info_v5* nvl_domain_info,
                           struct at_nccl_tuner_constants_v5* constants);
  at_nccl_result_t (*getCollInfo)(void* context, at_nccl_func_t coll_type, size_t n_bytes,
                                  int num_pipe_ops, float** coll_cost_table, int num_algo,
                                  int num_proto, int reg_buff, int* n_channels);
  at_nccl_result_t (*finalize)(void* context);
} at_nccl_tuner_v5_t;

/* ncclTuner_v4_t (NCCL 2.24 to 2.27): exported as ncclTunerPlugin_v4. */
typedef struct {
  const char* name;
  at_nccl_result_t (*init)(size_t n_ranks, size_t n_nodes, at_nccl_logger_t log, void** context);
  at_nccl_result_t (*getCollInfo)(void* context, at_nccl_func_t coll_type, size_t n_bytes,
                                  int num_pipe_ops, float** coll_cost_table, int num_algo,
                                  int num_proto, int reg_buff, int* n_channels);
  at_nccl_result_t (*destroy)(void* context);
} at_nccl_tuner_v4_t;

/* ncclTuner_v3_t (NCCL 2.22 and 2.23): v4 without reg_buff. */
typedef struct {
  const char* name;
  at_nccl_result_t (*init)(size_t n_ranks, size_t n_nodes, at_nccl_logger_t log, void** context);
  at_nccl_result_t (*getCollInfo)(void* context, at_nccl_func_t coll_type, size_t n_bytes,
                                  int num_pipe_ops, float** coll_cost_table, int num_algo,
                                  int num_proto, int* n_channels);
  at_nccl_result_t (*destroy)(void* context);
} at_nccl_tuner_v3_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AUTOTUNED_CLIENT_NCCL_TUNER_NCCL_TUNER_ABI_H_ */
