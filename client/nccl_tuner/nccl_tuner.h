/* libautotuned_nccl_tuner.so: an NCCL tuner plugin that steers NCCL's
 * algorithm, protocol and channel count per collective call from a table
 * that autotuned measured, plus a forcing API for the daemon's GPU worker.
 * docs/nccl_tuner.md has the whole of it; this header is the contract.
 *
 * Loading. NCCL_TUNER_PLUGIN=/path/libautotuned_nccl_tuner.so makes NCCL
 * dlopen() the library in the user's process; it looks up
 * ncclTunerPlugin_v5 (NCCL 2.28 and later), else ncclTunerPlugin_v4
 * (2.24 to 2.27), else ncclTunerPlugin_v3 (2.22, 2.23); all three are
 * exported, named "autotuned". The library is C with no C++ runtime, and
 * exports only those three structs and the at_nccl_tuner_* functions below.
 *
 * The table. Read once per communicator, at the plugin's init, from the path
 * in AUTOTUNED_NCCL_TABLE (default AT_NCCL_TUNER_DEFAULT_TABLE). ASCII:
 *
 *   autotuned-nccl-table 1
 *   identity <1-64 of [0-9a-f]>
 *   # comments and blank lines anywhere after the first line
 *   <collective> <nranks> <nnodes> <min_bytes> <max_bytes> <algo> <proto> <channels>
 *
 * collective: all_reduce | all_gather | reduce_scatter | broadcast | reduce;
 * bytes as NCCL passes them (the larger of one rank's send and receive
 * bytes), an inclusive range; algo and proto: the names below, or both
 * `default`; channels 0..64 (0: NCCL's; else the most channels NCCL may
 * spread the call over: it uses fewer for small messages, and never more
 * than the communicator has; 0 with collnet_direct, collnet_chain, and nvls
 * when nnodes > 1, NCCL's collnet path, which takes the count unchecked). At
 * most 1 MiB, lines of at most 512 bytes, each ending with a newline (the
 * last too: a file cut short is rejected), 4096 rows; rows of one
 * (collective, nranks, nnodes) do not overlap. Any violation rejects the
 * whole file. A communicator uses the rows
 * of its own nranks and nnodes; a call whose size no row holds, a missing or
 * rejected table: NCCL's own choice. One log line per communicator through
 * NCCL's logger says which (WARN for a rejected file, else INFO); log lines
 * are printable ASCII (other bytes written \xNN), the path cut at 256 bytes.
 *
 * Applying a choice (a row's or a force's): if NCCL offers the
 * (algo, proto) entry of the call's cost table (cost >= 0), its cost becomes
 * 0.0, the least, and channels > 0 sets the call's channel limit; if NCCL
 * does not offer it (cost < 0), nothing changes, channels included. A
 * channel count never goes where NCCL takes it unchecked: a force of
 * collnet_direct, collnet_chain, or of nvls on several nodes (or unknown
 * ones), with channels 1..64, is not applied; a default row's channels, or a
 * forced channel limit alone, are not given to a call NCCL may run on one of
 * those (on several nodes: it offers one; on one node: one is its own pick,
 * the least-cost entry).
 * The plugin never returns an error to NCCL: any problem leaves NCCL's own
 * choice.
 *
 * All functions are thread-safe. */
#ifndef AUTOTUNED_CLIENT_NCCL_TUNER_NCCL_TUNER_H_
#define AUTOTUNED_CLIENT_NCCL_TUNER_NCCL_TUNER_H_

#ifdef __cplusplus
extern "C" {
#endif

#define AT_NCCL_TUNER_DEFAULT_TABLE "/var/lib/autotuned/nccl_tuner.table"
#define AT_NCCL_TUNER_TABLE_ENV "AUTOTUNED_NCCL_TABLE"
/* AUTOTUNED_NCCL_TABLE=off: no table is read (the daemon's GPU worker sets
 * it, so that a host's table never steers what the daemon measures). */
#define AT_NCCL_TUNER_TABLE_OFF "off"
#define AT_NCCL_TUNER_MAX_CHANNELS 64

/* NCCL's numbering (NCCL_ALGO_* and NCCL_PROTO_* of its nccl_tuner.h). */
enum {
  AT_NCCL_ALGO_TREE = 0,
  AT_NCCL_ALGO_RING = 1,
  AT_NCCL_ALGO_COLLNET_DIRECT = 2,
  AT_NCCL_ALGO_COLLNET_CHAIN = 3,
  AT_NCCL_ALGO_NVLS = 4,
  AT_NCCL_ALGO_NVLS_TREE = 5,
  AT_NCCL_ALGO_PAT = 6,
  AT_NCCL_ALGO_COUNT = 7
};
enum {
  AT_NCCL_PROTO_LL = 0,
  AT_NCCL_PROTO_LL128 = 1,
  AT_NCCL_PROTO_SIMPLE = 2,
  AT_NCCL_PROTO_COUNT = 3
};

/* The forcing API, for a process that drives NCCL itself (the daemon's GPU
 * worker): it dlopen()s this library before its first NCCL communicator, with
 * NCCL_TUNER_PLUGIN naming the same file, so that NCCL gets the same handle.
 *
 * Forces (algo, proto) on the calling thread's NCCL calls: while a force is
 * set, the plugin's getCollInfo on this thread applies it and ignores the
 * table. channels in 1..64 sets the channel limit; anything else leaves it
 * to NCCL. With algo < 0 or proto < 0, a channel limit alone is forced
 * (NCCL's algorithm and protocol), and without one the force is cleared. getCollInfo runs on the
 * thread that makes the NCCL call for a blocking communicator (for a
 * non-blocking one it may run on another thread, which sees no force).
 * Every call, clearing included, resets the thread's outcome to 0. */
void at_nccl_tuner_force(int algo, int proto, int channels);

/* The calling thread's outcome since its last at_nccl_tuner_force:
 *   0  no getCollInfo ran on this thread (or no force is set);
 *   1  the last getCollInfo applied the forced choice;
 *  -1  the last one found the forced (algo, proto) not offered by NCCL for
 *      that call (cost < 0, or outside its table), or could not give its
 *      channel limit (NCCL's collnet path, above): NCCL chose. */
int at_nccl_tuner_forced_outcome(void);

/* "tree", "ring", "collnet_direct", "collnet_chain", "nvls", "nvls_tree",
 * "pat" for 0..6; "ll", "ll128", "simple" for 0..2; NULL out of range.
 * Static strings. */
const char* at_nccl_tuner_algo_name(int algo);
const char* at_nccl_tuner_proto_name(int proto);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AUTOTUNED_CLIENT_NCCL_TUNER_NCCL_TUNER_H_ */
