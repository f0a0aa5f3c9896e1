/* autotuned kernels: candidate collective implementations over NVLink P2P.
 *
 * A C ABI (plain C types only; this header compiles as C and C++), so that
 * the daemon and a user's process (ctypes, torch.library) call the very same
 * code. Link //kernels:autotuned_kernels, or load //kernels:libautotuned_kernels_abi.so.
 *
 * Model. `world` ranks (2..8), one GPU each, every rank launches the same
 * collective with the same arguments (except `rank`, `output` and its own
 * entries) in the same order: a collective call. Every rank reads its peers'
 * memory directly (loads over NVLink; nothing is written to a peer except
 * signal flags and, for the push variants and the copy engine only, the
 * peers' scratch). So everything a kernel reads from (or writes to) a peer
 * is passed as a peer pointer valid in the calling process: either one
 * process owns all GPUs and enabled peer access (see at_p2p_group_create),
 * or the pointers were opened from CUDA IPC handles (cudaIpcOpenMemHandle).
 * The kernels are the same.
 *
 * Per rank the caller provides, in peer-visible device memory:
 *   - a signal buffer of at_p2p_signal_bytes() bytes, zeroed once
 *     (at_p2p_signal_init) before first use;
 *   - for the two-shot all-reduces (pull, chunked and push) and the copy
 *     engine, a scratch buffer of at least at_p2p_scratch_bytes(...) bytes
 *     (contents need no initialization);
 *   - for the push one-shot, a buffer of its own (no other algo may use it)
 *     of at least at_p2p_scratch_bytes(...) bytes, the same size on every
 *     rank, prepared by at_p2p_scratch_init before first use and again after
 *     an error.
 * Launches that share a signal buffer must be serialized on that rank (one
 * stream, or otherwise ordered); different ranks run concurrently. Block b of
 * a rank waits for block b of its peers, so all `blocks` of a launch must be
 * able to run at once on every GPU (blocks <= SMs available to the kernel;
 * up to the 132 SMs of an H100/H200, but mind MIG/MPS partitions and
 * anything else running on the GPU).
 *
 * Launch functions are asynchronous on `stream` (a cudaStream_t passed as
 * void*; NULL = the legacy default stream), must be called with the rank's
 * device current (cudaSetDevice), and may be captured in a CUDA graph: the
 * kernels keep their own sequence numbers in the signal buffer, nothing is
 * passed from the host per launch. They return 0 or a cudaError_t value
 * (AT_ERR_INVALID_VALUE == cudaErrorInvalidValue for rejected arguments; see
 * at_p2p_check_args for the reason). count == 0 is a valid no-op on all ranks.
 *
 * Data. Element type and reduction as in kernels/types.h: fp32, bf16, fp16,
 * 16-bit types accumulate in fp32; every rank reduces in rank order 0..world-1,
 * so all ranks get bitwise identical results. All pointers (inputs, output,
 * scratch) must be 16-byte aligned (AT_P2P_ALIGNMENT; cudaMalloc gives 256):
 * the fast path moves 16 bytes (uint4) per load/store and counts that are not
 * a multiple of the 16-byte vector are finished by a scalar tail. The only
 * non-vectorized case is reduce_scatter (and the copy unit of all_gather,
 * all_to_all, all_to_all_v and broadcast), see at_p2p_is_vectorized.
 *
 * Shapes (`count` as in proto/autotuned.proto's Problem, per rank):
 *   all_reduce:      inputs `count`, output `count`.
 *   all_gather:      inputs `count`, output `world * count`.
 *   reduce_scatter:  inputs `world * count`, output `count`.
 *   all_to_all:      inputs `world * count`, output `world * count` (even
 *                    splits: `count` elements from every rank to every rank).
 *   broadcast:       input `count` (read on `root` only), output `count`.
 *   all_to_all_v:    uneven splits, a world x world matrix instead of
 *                    `count`: rank r's input is its row's sum, its output
 *                    its column's (at_p2p_all_to_all_v).
 */
#ifndef AUTOTUNED_KERNELS_AUTOTUNED_KERNELS_H_
#define AUTOTUNED_KERNELS_AUTOTUNED_KERNELS_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version of this ABI: major * 10000 + minor * 100 + patch. A change of major
 * means an incompatible change of a struct or signature; a change of minor,
 * an addition (an algo, a function). */
#define AT_KERNELS_VERSION 20500
int at_kernels_version(void);

/* Return codes: 0 or a cudaError_t value. */
#define AT_OK 0
#define AT_ERR_INVALID_VALUE 1 /* == cudaErrorInvalidValue */

/* A static, human readable string for a return code (cudaGetErrorString). */
const char* at_error_string(int code);

/* Element types and reductions: the values of autotuned::DType / ReduceOp. */
#define AT_DTYPE_FLOAT32 1
#define AT_DTYPE_BFLOAT16 2
#define AT_DTYPE_FLOAT16 3
#define AT_OP_SUM 1
#define AT_OP_MAX 2
#define AT_OP_MIN 3

/* Limits (also returned by at_p2p_get_limits, for ctypes). */
#define AT_P2P_MIN_WORLD 2
#define AT_P2P_MAX_WORLD 8
#define AT_P2P_MAX_BLOCKS 132     /* blocks: 1..132 */
#define AT_P2P_MAX_THREADS 1024   /* threads: 32..1024, a multiple of 32 */
#define AT_P2P_ALIGNMENT 16       /* bytes, every data pointer */
#define AT_P2P_SIGNAL_ALIGNMENT 128 /* bytes, every signal pointer */
#define AT_P2P_PIPELINE_DEPTH 2   /* scratch slots of the chunked two-shot */

typedef struct at_p2p_limits {
  int min_world;
  int max_world;
  int max_blocks;
  int max_threads;
  int alignment;
  int signal_alignment;
  int pipeline_depth;
  int64_t signal_bytes;
} at_p2p_limits;
void at_p2p_get_limits(at_p2p_limits* out);

/* Implementations (the `algo` argument). */
#define AT_ALGO_ALL_REDUCE_ONE_SHOT 1
  /* Every rank reads all `world` inputs and reduces the whole buffer. Start
   * barrier, reduce, end barrier. Not in place. No scratch. */
#define AT_ALGO_ALL_REDUCE_TWO_SHOT 2
  /* Reduce-scatter then all-gather: rank r reduces slice r (reading every
   * input) into its scratch and its output, then copies the other slices from
   * the peers' scratch. Scratch: one slice. In place allowed (output == own
   * input). */
#define AT_ALGO_ALL_REDUCE_TWO_SHOT_CHUNKED 3
  /* Two-shot over chunks of `chunk_elems` elements, pipelined: the reduce of
   * chunk k runs before (overlapping the peers' progress on) the gather of
   * chunk k-1, through AT_P2P_PIPELINE_DEPTH scratch slots of one chunk slice
   * each, so the scratch is bounded by the chunk, not by the message.
   * chunk_elems: a positive multiple of the vector width (4 for fp32, 8 for
   * 16-bit types). In place allowed. */
#define AT_ALGO_ALL_GATHER 4
  /* Every rank copies each rank's input into its place of the output. In
   * place allowed (own input == output + rank * count). No scratch; op
   * ignored. */
#define AT_ALGO_REDUCE_SCATTER 5
  /* Rank r reduces block r of every input into its output. In place allowed
   * (output == own input + rank * count). No scratch. Vectorized only when
   * count is a multiple of the vector width. */
#define AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH 6
  /* Two-shot that pushes instead of pulling the gathered slices: start
   * barrier; rank r reduces slice r (reading every input) into its output
   * AND stores it into slot r of every peer's scratch (remote stores over
   * NVLink); barrier; then copies slots s != r of its own (local) scratch
   * into its output. One NVLink load round trip fewer than
   * AT_ALGO_ALL_REDUCE_TWO_SHOT, no end barrier. Scratch: `world` slots of
   * one slice each (slot r unused), about the whole message, so every
   * rank's scratch buffer is written by its peers. In place allowed (output
   * == own input). */
#define AT_ALGO_ALL_REDUCE_ONE_SHOT_PUSH 7
  /* One-shot with no barrier: every rank stores its input into its slot of
   * every peer's buffer (remote stores over NVLink), then waits, element by
   * element, for the peers' data to arrive in its own buffer (an element is
   * there when it is no longer the empty marker, -0.0) and reduces. One
   * NVLink crossing, no round trip. bfloat16 and float16 only (the empty
   * marker is the 16-bit -0.0; an input -0.0 is sent as +0.0). Reads only
   * this rank's own input, which need not be peer-visible (peer_inputs[p]
   * for p != rank may be NULL). Buffer (`peer_scratch`, `scratch_bytes`):
   * 3 x world slots of the message, see at_p2p_scratch_init. In place
   * allowed. Since ABI 1.2. */
#define AT_ALGO_ALL_REDUCE_COPY_ENGINE 8
  /* The data moves by copy engine, not by SMs: after a start barrier, each
   * rank's copy engine copies its input, in chunks of `chunk_elems`, into
   * slot `rank` of every peer's scratch (cudaMemcpyAsync on a side stream
   * the library keeps per device and caller stream, forked from and joined
   * back to `stream`, so CUDA graphs capture it), each chunk followed by an
   * 8-byte flag copy; meanwhile a kernel on `stream` waits for each chunk's
   * flags and reduces it with the own input. For large messages. Reads
   * only this rank's own input (peer_inputs[p], p != rank, may be NULL).
   * Scratch: `world` slots of the message. chunk_elems: a positive
   * multiple of the vector width, at most 1024 chunks. Not in place. The
   * side stream, two events and the launch's host calls (2 x (world - 1)
   * copies per chunk) make its fixed cost higher than the kernels'. Since
   * ABI 1.2. */
#define AT_ALGO_ALL_TO_ALL 9
  /* Even splits: rank r copies segment r (`count` elements) of every rank
   * p's input into segment p of its output (loads over NVLink). Start
   * barrier, copy, end barrier. Not in place. No scratch; op ignored.
   * Since ABI 2.0. */
#define AT_ALGO_BROADCAST 10
  /* Every rank copies `root`'s input into its output (loads over NVLink;
   * the root copies its own unless in place). Start barrier, copy, end
   * barrier. Only the root's input is read: peer_inputs[p], p != root, may
   * be NULL. In place allowed (output == own input). No scratch; op
   * ignored. Since ABI 2.0. */
#define AT_ALGO_ALL_REDUCE_PUSH_PIPELINED 11
  /* Two-shot in which every byte crosses NVLink as a store, pipelined over
   * chunks of `chunk_elems` elements: rank r stores slice q of each chunk
   * of its input into rank q's scratch; reduces slice r (its own input and
   * what its peers stored, all local) into its output and into every
   * peer's scratch; copies the other reduced slices from its own scratch
   * into its output. The three steps of consecutive chunks overlap, through
   * 3 scratch slots per step (kernels/p2p_layout.h, PipeLayout). For large
   * messages on 3 or more GPUs. Reads only this rank's own input
   * (peer_inputs[p], p != rank, may be NULL, and the input need not be
   * peer-visible). Scratch: 6 chunks' worth (at_p2p_scratch_bytes).
   * chunk_elems: a positive multiple of the vector width. In place
   * allowed. Since ABI 2.2. */
#define AT_ALGO_BROADCAST_PUSH_PIPELINED 12
  /* Broadcast in which the root sends each byte once: chunks of
   * `chunk_elems` elements, each cut into world - 1 slices; the root stores
   * slice i into the scratch of the i-th rank after it, which copies it
   * into its output and stores it into the scratch of every other non-root
   * rank; each non-root copies the other slices from its own scratch. The
   * steps of consecutive chunks overlap as in
   * AT_ALGO_ALL_REDUCE_PUSH_PIPELINED. Only the root's input is read, by
   * the root (peer_inputs[p], p != root, may be NULL). Scratch: 6 chunks'
   * worth. chunk_elems: a positive multiple of the vector width. In place
   * allowed (output == own input). op ignored. Since ABI 2.2. */
#define AT_ALGO_ALL_TO_ALL_V 13
  /* Uneven splits: split_counts[s * world + d] elements go from rank s to
   * rank d (world x world, row-major, as Problem.split_counts in
   * proto/autotuned.proto; the same matrix on every rank). Rank s's input
   * is its row: the pieces for d = 0..world-1 one after the other (piece d
   * at the sum of the row's entries before d); rank d's output is its
   * column: the pieces from s = 0..world-1 one after the other (piece s at
   * the sum of the column's entries before s). Rank d copies every piece
   * of its column from rank s's input into its output (loads over NVLink),
   * in 16-byte vectors where the piece's source and destination offsets
   * are 16-byte aligned alike (otherwise in the largest unit, 8, 4 or 2
   * bytes, in which they are), a scalar head and tail by element. Start
   * barrier, copy, end barrier. Not in place. No scratch. Takes the
   * matrix, so it has functions of its own (at_p2p_all_to_all_v,
   * at_p2p_check_all_to_all_v): at_p2p_launch and at_p2p_check_args reject
   * this algo. Since ABI 2.3. */
#define AT_ALGO_ALL_REDUCE_RING 14
  /* Ring: after a start barrier, each rank stores only into the next rank
   * ((rank + 1) % world), in 2 x (world - 1) steps over `world` shards of
   * the message (SliceElems): reduce-scatter steps pass a partial sum of
   * one shard along the ring (each rank adds its own input), the rank
   * that adds the last input keeps the shard in its output, and
   * all-gather steps pass the reduced shards along (each rank copies them
   * into its output). Each step waits for the previous rank's block with
   * the same block index (per-block flags, no grid-wide wait), so every
   * GPU sends to one peer and receives from one at a time, the pattern
   * that moves the most bytes per GPU over NVLink switches. Reads only
   * this rank's own input (peer_inputs[p], p != rank, may be NULL).
   * chunk_elems: 0 sends each shard whole; a positive multiple of the
   * vector width cuts it in parts of that many elements, each passed on
   * as soon as it has arrived (the steps overlap). Scratch: `world` slots
   * of one shard (as AT_ALGO_ALL_REDUCE_TWO_SHOT_PUSH). In place allowed
   * (output == own input). Since ABI 2.4. */
#define AT_ALGO_ALL_REDUCE_CE_RING 15
  /* The copy engine and the SMs at once: the first half of the message
   * (rounded down to whole vectors) goes through
   * AT_ALGO_ALL_REDUCE_COPY_ENGINE (chunk_elems its chunk, 16 reducing
   * blocks) while the rest goes through AT_ALGO_ALL_REDUCE_RING (`blocks`
   * blocks, at most AT_P2P_MAX_BLOCKS - 1, of `threads`) on a second side
   * stream, forked from and joined back to `stream`. On one NVLink the two
   * paths together move more than either alone. Reads only this rank's
   * own input. Scratch: the copy engine's for the first part, then the
   * ring's for the rest. Not in place. Since ABI 2.4. */
#define AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE 16
  /* The push two-shot on buffers that every rank can write: in place only
   * (output == peer_inputs[rank]). Start barrier; rank r reduces slice r
   * (reading every input) and stores it into slice r of every rank's
   * input, its own included; barrier. No scratch and no local copy: the
   * peers' stores land in the output itself, as in PyTorch's symmetric-
   * memory two-shot. Every peer_inputs[p] must be writable by this rank
   * (the group's peer-mapped buffers) and left alone by its owner during
   * the call. Since ABI 2.5. */
#define AT_ALGO_LAST AT_ALGO_ALL_REDUCE_TWO_SHOT_IN_PLACE

/* Name of an algo ("all_reduce_one_shot", ...) or NULL. */
const char* at_p2p_algo_name(int algo);

typedef struct at_p2p_args {
  int world;                     /* 2..8 */
  int rank;                      /* 0..world-1 */
  int dtype;                     /* AT_DTYPE_* */
  int op;                        /* AT_OP_* (reductions only) */
  int64_t count;                 /* per-rank count, see Shapes above */
  const void* const* peer_inputs; /* [world] every rank's input, peer-visible */
  void* output;                  /* this rank's output (local) */
  void* const* peer_scratch;     /* [world] scratch buffers (two-shot) or NULL */
  int64_t scratch_bytes;         /* capacity of each scratch buffer */
  void* const* peer_signals;     /* [world] signal buffers, peer-visible */
  int blocks;                    /* 1..AT_P2P_MAX_BLOCKS */
  int threads;                   /* 32..AT_P2P_MAX_THREADS, multiple of 32 */
  int64_t chunk_elems;           /* chunked two-shot and copy engine only */
  int64_t spin_limit;            /* 0 = wait for peers forever; otherwise the
                                    number of polls of one flag after which
                                    the block gives up, records the error in
                                    this rank's signal buffer and exits */
  int root;                      /* broadcast only: 0..world-1 (since ABI 2.0) */
} at_p2p_args;

/* sizeof(at_p2p_args) as compiled into the library (ctypes layout check). */
size_t at_p2p_args_size(void);

/* Pure host validation (no device access, no CUDA call): AT_OK, or
 * AT_ERR_INVALID_VALUE with a reason written to `reason` (NUL terminated,
 * truncated to reason_len; reason may be NULL). Checks the algo, world, rank,
 * dtype, op, count, launch shape, chunk, spin limit, non-NULL and aligned
 * pointers, scratch capacity, the overlap / in-place rules. Every launch
 * function runs this first. AT_ALGO_ALL_TO_ALL_V is rejected: its check is
 * at_p2p_check_all_to_all_v. */
int at_p2p_check_args(int algo, const at_p2p_args* args, char* reason,
                      size_t reason_len);

/* Scratch bytes each rank needs for `algo` (0 for those without scratch), or
 * -1 for invalid arguments. chunk_elems is used by the chunked two-shot
 * and the pipelined push algos only (the copy engine's scratch does not
 * depend on it).
 * For the push one-shot: the bytes of its own buffer. */
int64_t at_p2p_scratch_bytes(int algo, int dtype, int world, int64_t count,
                             int64_t chunk_elems);

/* The buffers a group of `world` ranks needs for messages of up to
 * max_bytes bytes in any dtype the kernels take, each size rounded up to
 * 256 bytes: scratch_bytes, the largest of the plain and push two-shots', of
 * the chunked two-shot's and the pipelined push algos' with chunks of
 * chunk_bytes (0: not used; rounded down to whole 16-byte vectors, at
 * least one), and of the copy engine's for
 * messages of up to ce_max_bytes (0: not used); push_bytes, the push
 * one-shot's own buffer for messages of up to push_max_bytes (0: none).
 * The one computation of these sizes: P2P groups made in Python
 * (autotuned.kernels.P2PGroup) and p2p_bench size their buffers with it.
 * Returns AT_OK, or AT_ERR_INVALID_VALUE (out untouched) for a world outside
 * the limits, a negative size, or out == NULL. */
typedef struct at_p2p_group_sizes {
  int64_t scratch_bytes;
  int64_t push_bytes;
} at_p2p_group_sizes;
int at_p2p_group_sizes_for(int world, int64_t max_bytes, int64_t chunk_bytes,
                           int64_t ce_max_bytes, int64_t push_max_bytes,
                           at_p2p_group_sizes* out);

/* 1 when the launch takes the 16-byte vector path on every rank (scalar
 * tails aside), 0 otherwise (still correct, slower: reduce_scatter with count
 * not a multiple of the vector width goes element by element on the ranks
 * whose block is misaligned; all_gather, all_to_all and broadcast then copy
 * 8, 4 or 2-byte units),
 * -1 for invalid arguments (and for AT_ALGO_ALL_TO_ALL_V, whose unit is
 * chosen per piece). */
int at_p2p_is_vectorized(int algo, const at_p2p_args* args);

/* Launch `algo`; the named functions are the same with algo fixed. The
 * kernel (not the copy engine's copies) is launched as a programmatic
 * dependent of the kernel ahead of it on `stream`: it may be scheduled
 * before that kernel ends, and waits for it to end and for its memory
 * operations to be visible before it touches any memory; it lets the
 * kernel behind it be scheduled the same way at its start. Environment
 * AT_P2P_PDL=0 launches it plainly. */
int at_p2p_launch(int algo, const at_p2p_args* args, void* stream);
int at_p2p_all_reduce_one_shot(const at_p2p_args* args, void* stream);
int at_p2p_all_reduce_two_shot(const at_p2p_args* args, void* stream);
int at_p2p_all_reduce_two_shot_chunked(const at_p2p_args* args, void* stream);
int at_p2p_all_reduce_two_shot_push(const at_p2p_args* args, void* stream);
int at_p2p_all_reduce_one_shot_push(const at_p2p_args* args, void* stream);
int at_p2p_all_reduce_copy_engine(const at_p2p_args* args, void* stream);
int at_p2p_all_gather(const at_p2p_args* args, void* stream);
int at_p2p_reduce_scatter(const at_p2p_args* args, void* stream);
int at_p2p_all_to_all(const at_p2p_args* args, void* stream);
int at_p2p_broadcast(const at_p2p_args* args, void* stream);
int at_p2p_all_reduce_push_pipelined(const at_p2p_args* args, void* stream);
int at_p2p_broadcast_push_pipelined(const at_p2p_args* args, void* stream);
int at_p2p_all_reduce_ring(const at_p2p_args* args, void* stream);
int at_p2p_all_reduce_ce_ring(const at_p2p_args* args, void* stream);

/* All-to-all with uneven splits (AT_ALGO_ALL_TO_ALL_V). split_counts:
 * world * world element counts (see the algo), read during the call only:
 * the matrix travels to the kernel by value, as the pointers do, so a
 * CUDA graph captures it. From `args`: world, rank, dtype, peer_inputs (an
 * array of world pointers; entry s may be NULL when this rank receives
 * nothing from s and, for s == rank, sends nothing), output (may be NULL
 * when this rank receives nothing), peer_signals, blocks, threads,
 * spin_limit; count, op, chunk_elems, root and the scratch are ignored. A
 * matrix of zeros is a no-op on every rank; any other matrix is a
 * collective call on every rank, a rank that sends and receives nothing
 * included (the barriers wait for every rank). Returns as at_p2p_launch.
 * Since ABI 2.3. */
int at_p2p_all_to_all_v(const at_p2p_args* args, const int64_t* split_counts, void* stream);

/* The host validation of at_p2p_all_to_all_v, as at_p2p_check_args (which
 * it runs for the fields they share): AT_OK, or AT_ERR_INVALID_VALUE with
 * a reason: NULL args or split_counts, a negative entry, an entry or a
 * row or column sum beyond 2^44 elements, a NULL or misaligned pointer
 * that the call uses, an output that overlaps this rank's input. That
 * every rank passes the same matrix is the caller's to keep. Since ABI
 * 2.3. */
int at_p2p_check_all_to_all_v(const at_p2p_args* args, const int64_t* split_counts,
                              char* reason, size_t reason_len);

/* ---- Signal buffers -------------------------------------------------------
 * Protocol: per block b, each rank keeps its own launch counter (epoch) in its
 * signal buffer, read and advanced by the kernel itself. A flag is the 64-bit
 * value (epoch << 32 | point); rank p posts flags into slot [b][p] of every
 * rank's buffer with st.release.sys and waits on its own slots with
 * ld.acquire.sys until every peer's value is >= the awaited one. Each launch
 * starts with a barrier (peers' inputs are ready; the peers' previous launch
 * has completed, so nobody still reads this rank's scratch, and a peer may
 * write it); kernels that read peer inputs until their end finish with a
 * barrier (so, once a launch completes on a rank, no peer reads its input
 * anymore and the caller may overwrite it; the push two-shot's second
 * barrier, after its last peer access, plays that part). See
 * kernels/p2p_layout.h.
 *
 * After an error (spin limit reached) the ranks' counters disagree: with no
 * kernel running on any rank, zero every rank's signal buffer again. */
int64_t at_p2p_signal_bytes(void);

/* cudaMemsetAsync(signal, 0, at_p2p_signal_bytes(), stream). */
int at_p2p_signal_init(void* signal, void* stream);

/* Error word of a signal buffer: 0 = none, else the first error recorded:
 *   bits 0-7:   AT_SIGNAL_ERR_TIMEOUT (a spin limit was reached)
 *   bits 8-15:  the flag awaited: 1 = barrier, 2 = chunk reduced (the
 *               ring: a message from the previous rank), 3 = chunk
 *               gathered, 4 = the push one-shot's data, 5 = a copy-engine
 *               chunk
 *   bits 16-23: the peer rank that did not arrive
 *   bits 24-31: the block's signal row: its index (the ring beside the
 *               copy engine, AT_ALGO_ALL_REDUCE_CE_RING: its index + 1). */
#define AT_SIGNAL_ERR_TIMEOUT 1u
/* Copies the error word to *error (cudaMemcpyAsync on `stream`, then
 * cudaStreamSynchronize(stream)). */
int at_p2p_signal_error(const void* signal, void* stream, uint32_t* error);

/* Prepares a scratch buffer of `scratch_bytes` for `algo`, asynchronously on
 * `stream`: for the push one-shot, fills it with the empty marker and zeroes
 * its launch counters (needed before first use, and on every rank again
 * after an error, with no kernel of the group running; every rank's
 * preparation must be complete before any rank launches); for the other
 * algos, nothing. AT_ERR_INVALID_VALUE for a NULL buffer, an unknown algo or
 * a buffer too small for one slot. */
int at_p2p_scratch_init(int algo, void* scratch, int64_t scratch_bytes, void* stream);

/* Loads every kernel of the library into the current device's context.
 * CUDA loads a kernel lazily, at its first launch, and that load waits for
 * the kernels already running in the context: two ranks sharing one GPU (one
 * context) would deadlock on a first launch, one rank's kernel waiting for a
 * peer whose launch waits for it. at_p2p_group_create calls this for every
 * device it uses; callers that make their own buffers and share a GPU
 * between ranks call it once per device. Since ABI 1.2. */
int at_p2p_preload_kernels(void);

/* ---- One process, `world` local GPUs ----------------------------------------
 * Enables peer access between all pairs, loads the kernels on each device,
 * allocates a zeroed signal buffer and a scratch buffer of scratch_bytes (may
 * be 0) on each device, and keeps the pointer arrays. Restores the current
 * device. Ranks may share a GPU (the
 * same device listed twice: for tests on one GPU); the blocks of every rank
 * on a GPU must then fit on it at once. */
typedef struct at_p2p_group at_p2p_group;
int at_p2p_group_create(int world, const int* devices, int64_t scratch_bytes,
                        at_p2p_group** out);
void at_p2p_group_destroy(at_p2p_group* group); /* NULL is fine */
int at_p2p_group_world(const at_p2p_group* group);
int at_p2p_group_device(const at_p2p_group* group, int rank);
int64_t at_p2p_group_scratch_bytes(const at_p2p_group* group);
void* const* at_p2p_group_scratch(const at_p2p_group* group); /* [world] */
void* const* at_p2p_group_signals(const at_p2p_group* group); /* [world] */
/* Sets world, rank, peer_scratch, scratch_bytes, peer_signals of *args
 * (leaves the other fields alone). */
int at_p2p_group_init_args(const at_p2p_group* group, int rank,
                           at_p2p_args* args);
/* The push one-shot's own buffers: allocates them, `bytes` on each device
 * (replacing smaller ones; 0 frees them), prepared with at_p2p_scratch_init
 * and synchronized. Since ABI 1.2. */
int at_p2p_group_set_push_bytes(at_p2p_group* group, int64_t bytes);
int64_t at_p2p_group_push_bytes(const at_p2p_group* group);
/* at_p2p_group_init_args with the scratch `algo` uses: the push buffers for
 * the push one-shot, the scratch for the others. Since ABI 1.2. */
int at_p2p_group_init_algo_args(const at_p2p_group* group, int algo, int rank,
                                at_p2p_args* args);
/* Synchronizes every device of the group, then zeroes all signal buffers and
 * prepares the push buffers again. */
int at_p2p_group_reset(at_p2p_group* group);
/* Error word of `rank`'s signal buffer (read through a non-blocking stream of
 * the group, so it does not wait for the caller's streams). */
int at_p2p_group_error(const at_p2p_group* group, int rank, uint32_t* error);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* AUTOTUNED_KERNELS_AUTOTUNED_KERNELS_H_ */
