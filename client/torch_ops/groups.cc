#include "client/torch_ops/groups.h"

#include <map>
#include <mutex>
#include <utility>

#include <c10/util/Exception.h>
#include <torch/library.h>

namespace autotuned::torch_ops {
namespace {

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

struct Registry {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<const Group>, std::less<>> groups;  // guarded by mu
  std::vector<std::string> order;                                           // guarded by mu
  std::string default_name;                                                 // guarded by mu
};

Registry& TheRegistry() {
  static Registry* registry = new Registry;  // never destroyed: used until exit
  return *registry;
}

std::string Joined(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

template <typename T>
std::vector<T> Pointers(c10::IntArrayRef values) {
  std::vector<T> out;
  out.reserve(values.size());
  for (int64_t v : values) out.push_back(reinterpret_cast<T>(static_cast<uintptr_t>(v)));
  return out;
}

void RegisterGroupOp(std::string_view name, bool is_default, int64_t world, int64_t rank,
                     int64_t device, std::string_view process_group, c10::IntArrayRef inputs,
                     c10::IntArrayRef scratch, int64_t scratch_bytes, c10::IntArrayRef push,
                     int64_t push_bytes, c10::IntArrayRef signals, int64_t spin_limit,
                     std::vector<std::string> impls, std::vector<std::string> collectives,
                     c10::IntArrayRef algos, c10::IntArrayRef blocks, c10::IntArrayRef threads,
                     c10::IntArrayRef chunk_kib, c10::IntArrayRef max_bytes,
                     std::vector<std::string> max_bytes_names, c10::IntArrayRef flags,
                     int64_t launch, int64_t check_args, int64_t error_string, int64_t abi_version,
                     int64_t args_size) {
  TORCH_CHECK(!name.empty(), "_register_group: a group needs a name");
  TORCH_CHECK(world >= 1 && rank >= 0 && rank < world, "_register_group: rank ", rank, " of world ",
              world);
  const size_t n = impls.size();
  TORCH_CHECK(collectives.size() == n && algos.size() == n && blocks.size() == n &&
                  threads.size() == n && chunk_kib.size() == n && max_bytes.size() == n &&
                  max_bytes_names.size() == n && flags.size() == n,
              "_register_group: the implementation lists differ in length");
  auto g = std::make_shared<Group>();
  g->name = std::string(name);
  g->world = static_cast<int>(world);
  g->rank = static_cast<int>(rank);
  g->device = static_cast<int>(device);
  g->process_group = std::string(process_group);
  const bool p2p = launch != 0;
  if (p2p) {
    TORCH_CHECK(abi_version / 10000 == AT_KERNELS_VERSION / 10000,
                "_register_group: the kernels library's ABI version ", abi_version,
                "; the torch ops were built against ", AT_KERNELS_VERSION);
    TORCH_CHECK(args_size == static_cast<int64_t>(sizeof(at_p2p_args)),
                "_register_group: sizeof(at_p2p_args) is ", args_size,
                " in the kernels library but ", sizeof(at_p2p_args), " in the torch ops");
    TORCH_CHECK(check_args != 0 && error_string != 0,
                "_register_group: at_p2p_check_args and at_error_string are needed");
    for (c10::IntArrayRef a : {inputs, scratch, push, signals}) {
      TORCH_CHECK(static_cast<int64_t>(a.size()) == world,
                  "_register_group: a peer pointer array of ", a.size(), " for world ", world);
    }
    g->launch = reinterpret_cast<LaunchFn>(static_cast<uintptr_t>(launch));
    g->check_args = reinterpret_cast<CheckArgsFn>(static_cast<uintptr_t>(check_args));
    g->error_string = reinterpret_cast<ErrorStringFn>(static_cast<uintptr_t>(error_string));
    g->inputs = Pointers<const void*>(inputs);
    g->scratch = Pointers<void*>(scratch);
    g->push = Pointers<void*>(push);
    g->signals = Pointers<void*>(signals);
  }
  g->scratch_bytes = scratch_bytes;
  g->push_bytes = push_bytes;
  g->spin_limit = spin_limit;
  for (size_t i = 0; i < n; ++i) {
    Impl impl;
    impl.name = std::move(impls[i]);
    impl.collective = std::move(collectives[i]);
    impl.algo = static_cast<int>(algos[i]);
    impl.blocks = static_cast<int>(blocks[i]);
    impl.threads = static_cast<int>(threads[i]);
    impl.chunk_kib = chunk_kib[i];
    impl.max_bytes = max_bytes[i];
    impl.max_bytes_name = std::move(max_bytes_names[i]);
    impl.flags = flags[i];
    g->impls.push_back(std::move(impl));
  }
  RegisterGroup(std::move(g), is_default);
}

bool UnregisterGroupOp(std::string_view name) { return UnregisterGroup(name); }

}  // namespace

const Impl& Group::Find(std::string_view impl_name, std::string_view coll) const {
  for (const Impl& impl : impls) {
    if (impl.name != impl_name) continue;
    TORCH_CHECK(impl.collective == coll, "implementation ", Quoted(impl_name), " is an ",
                impl.collective, ", not an ", coll);
    return impl;
  }
  std::vector<std::string> known;
  for (const Impl& impl : impls) known.push_back(impl.name);
  TORCH_CHECK(false, "implementation ", Quoted(impl_name),
              " does not run in-process (known: ", Joined(known), ")");
}

std::shared_ptr<const Group> FindGroup(std::string_view name) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (name.empty()) {
    TORCH_CHECK(!r.default_name.empty(),
                "no P2PGroup: make one with autotuned.kernels.P2PGroup(pg)");
    name = r.default_name;
  }
  auto it = r.groups.find(name);
  TORCH_CHECK(it != r.groups.end(), "no P2PGroup named ", Quoted(name), " (have: ", Joined(r.order),
              ")");
  return it->second;
}

void RegisterGroup(std::shared_ptr<const Group> group, bool is_default) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  const std::string name = group->name;
  if (r.groups.find(name) == r.groups.end()) r.order.push_back(name);
  r.groups[name] = std::move(group);
  if (is_default) r.default_name = name;
}

bool UnregisterGroup(std::string_view name) {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.groups.find(name);
  if (it == r.groups.end()) return false;
  r.groups.erase(it);
  for (auto o = r.order.begin(); o != r.order.end(); ++o) {
    if (*o == name) {
      r.order.erase(o);
      break;
    }
  }
  if (r.default_name == name) r.default_name.clear();
  return true;
}

std::vector<std::string> GroupNames() {
  Registry& r = TheRegistry();
  std::lock_guard<std::mutex> lock(r.mu);
  return r.order;
}

TORCH_LIBRARY_FRAGMENT(autotuned, m) {
  m.def(
      "_register_group(str name, bool is_default, int world, int rank, int device, "
      "str process_group, int[] inputs, int[] scratch, int scratch_bytes, int[] push, "
      "int push_bytes, int[] signals, int spin_limit, str[] impls, str[] collectives, "
      "int[] algos, int[] blocks, int[] threads, int[] chunk_kib, int[] max_bytes, "
      "str[] max_bytes_names, int[] flags, int launch, int check_args, int error_string, "
      "int abi_version, int args_size) -> ()",
      &RegisterGroupOp);
  m.def("_unregister_group(str name) -> bool", &UnregisterGroupOp);
  m.def("_group_names() -> str[]", &GroupNames);
}

}  // namespace autotuned::torch_ops
