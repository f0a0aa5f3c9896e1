// The groups the C++ torch ops find by name: what a P2PGroup
// (client/python/autotuned/p2p.py) hands over when autotuned.ops registers
// it, so that a launch needs no Python.
//
// Python registers a group with torch.ops.autotuned._register_group (its
// world, rank, device, the peer pointer arrays, buffer sizes, spin limit, the
// kernels library's at_p2p_launch / at_p2p_check_args / at_error_string as
// function pointers, and the implementations that run in it: their names,
// algos, catalogue defaults and limits, from autotuned.kernels_lib's one
// table) and forgets it with _unregister_group. The pointers stay valid
// until the group is unregistered: P2PGroup.close() unregisters before it
// frees them. The registry is thread-safe; a launch holds a shared_ptr to the
// group it found, so unregistering during a launch frees nothing under it.
#ifndef AUTOTUNED_CLIENT_TORCH_OPS_GROUPS_H_
#define AUTOTUNED_CLIENT_TORCH_OPS_GROUPS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/autotuned_kernels.h"

namespace autotuned::torch_ops {

using LaunchFn = int (*)(int, const at_p2p_args*, void*);
using CheckArgsFn = int (*)(int, const at_p2p_args*, char*, size_t);
using ErrorStringFn = const char* (*)(int);

// How an implementation uses the group's buffers (Impl::flags; the values of
// autotuned.p2p's _FLAG_* constants, which P2PGroup.torch_ops_state passes).
inline constexpr int64_t kReadsOwnInput = 1;  // x itself when 16-byte aligned, else staged
inline constexpr int64_t kUsesScratch = 2;    // peer_scratch = the group's scratch
inline constexpr int64_t kUsesPush = 4;       // peer_scratch = the push one-shot's buffers
inline constexpr int64_t kChunked = 8;        // chunk_elems from chunk_kib

struct Impl {
  std::string name;        // "all_reduce/one_shot"
  std::string collective;  // "all_reduce"
  int algo = 0;            // 0: torch.distributed's collective (NCCL)
  int blocks = 0;          // catalogue defaults, used where the call passes 0
  int threads = 0;
  int64_t chunk_kib = 0;
  int64_t max_bytes = 0;       // the largest input (bytes) it runs on here
  std::string max_bytes_name;  // the P2PGroup attribute max_bytes comes from
  int64_t flags = 0;
};

struct Group {
  std::string name;
  int world = 0;
  int rank = 0;
  int device = 0;             // CUDA device index
  std::string process_group;  // c10d's name of the group (NCCL path)
  // [world] each, empty for a group without P2P buffers (NCCL only).
  std::vector<const void*> inputs;  // staging buffers
  std::vector<void*> scratch;
  std::vector<void*> push;
  std::vector<void*> signals;
  int64_t scratch_bytes = 0;
  int64_t push_bytes = 0;
  int64_t spin_limit = 0;
  LaunchFn launch = nullptr;
  CheckArgsFn check_args = nullptr;
  ErrorStringFn error_string = nullptr;
  std::vector<Impl> impls;

  // The implementation called `name`, of `collective`; throws (c10::Error)
  // for one that does not run here or belongs to another collective.
  const Impl& Find(std::string_view name, std::string_view collective) const;
};

// The group registered under `name` ("" = the last one registered as the
// default); throws c10::Error when there is none.
std::shared_ptr<const Group> FindGroup(std::string_view name);

// Registry operations behind the _register_group / _unregister_group /
// _group_names ops (groups.cc defines those ops).
void RegisterGroup(std::shared_ptr<const Group> group, bool is_default);
bool UnregisterGroup(std::string_view name);
std::vector<std::string> GroupNames();

}  // namespace autotuned::torch_ops

#endif  // AUTOTUNED_CLIENT_TORCH_OPS_GROUPS_H_
