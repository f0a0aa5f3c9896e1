// The catalogue of the cuda backend: NCCL for every collective, and the
// NVLink P2P kernels of //kernels (autotuned_kernels.h) with their launch
// shape as parameters. Static data: building it needs no GPU, so the daemon
// validates requests without touching CUDA (the GPUs belong to its worker
// process, see gpu_worker.h).
#pragma once

#include "daemon/measure/catalogue/catalogue.h"

namespace autotuned::cuda {

// Names: "all_reduce/nccl", "all_reduce/one_shot", "all_reduce/two_shot",
// "all_reduce/two_shot_push", "all_reduce/two_shot_in_place" (run in place:
// the result lands in each rank's input buffer), "all_reduce/one_shot_push"
// (bfloat16 and float16 only), "all_reduce/two_shot_chunked", "all_reduce/copy_engine",
// "all_reduce/push_pipelined", "all_reduce/p2p_ring", "all_reduce/ce_ring",
// "all_gather/nccl", "all_gather/p2p", "reduce_scatter/nccl",
// "reduce_scatter/p2p", "all_to_all/nccl", "all_to_all/p2p" (even splits, and
// uneven ones through at_p2p_all_to_all_v), "broadcast/nccl", "broadcast/p2p",
// "broadcast/push_pipelined". P2P
// entries take "blocks" and "threads" (and "chunk_kib" for the chunked
// two-shot, the copy engines, the pipelined push ones and the ring, whose
// 0 means whole shards), run on 2..8
// ranks and need P2P. The NCCL entries but all_to_all
// take "algo", "proto" (given together) and "channels": NCCL's own choices,
// 0 = NCCL's (docs/nccl_tuner.md).
// With `test_faults`, also "all_reduce/hang_test": a one-shot launched on
// rank 0 alone with no spin limit, a kernel that hangs until its process is
// killed (for the containment test).
Catalogue CudaCatalogue(bool test_faults);

}  // namespace autotuned::cuda
