#include "daemon/measure/backend/cuda/worker/nccl_tuner_link.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/self_exe.h"

namespace autotuned::cuda {
namespace {

constexpr char kLibrary[] = "libautotuned_nccl_tuner.so";

// The plugin's forcing API (client/nccl_tuner/nccl_tuner.h).
struct Api {
  void (*force)(int algo, int proto, int channels) = nullptr;
  int (*outcome)() = nullptr;
  const char* (*algo_name)(int) = nullptr;
  const char* (*proto_name)(int) = nullptr;
};

Api api;                                  // set once by LoadNcclTuner
std::string* load_error = new std::string("LoadNcclTuner was not called");

std::string Name(const char* (*name)(int), int value) {
  const char* s = name != nullptr ? name(value) : nullptr;
  return s != nullptr ? s : absl::StrCat(value);
}

}  // namespace

std::string NcclChoice::ToString() const {
  std::string s = algo >= 0 || proto >= 0
                      ? absl::StrCat(algo >= 0 ? Name(api.algo_name, algo) : "NCCL's algorithm", "/",
                                     proto >= 0 ? Name(api.proto_name, proto) : "NCCL's protocol")
                      : "NCCL's algorithm and protocol";
  if (channels > 0) absl::StrAppend(&s, ", ", channels, " channels");
  return s;
}

absl::Status LoadNcclTuner() {
  std::vector<std::string> paths;
  if (const char* p = std::getenv("AUTOTUNED_NCCL_TUNER_PLUGIN"); p != nullptr && *p != '\0') {
    paths.push_back(p);
  } else {
    const std::string dir = SelfExeDir();
    paths.push_back(absl::StrCat(dir, "/", kLibrary));
    paths.push_back(absl::StrCat(dir, "/../lib/autotuned/", kLibrary));
  }
  std::string tried;
  for (const std::string& path : paths) {
    if (access(path.c_str(), R_OK) != 0) {
      absl::StrAppend(&tried, tried.empty() ? "" : ", ", path);
      continue;
    }
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      *load_error = absl::StrCat("dlopen ", path, ": ", dlerror());
      return absl::FailedPreconditionError(*load_error);
    }
    Api a;
    a.force = reinterpret_cast<void (*)(int, int, int)>(dlsym(handle, "at_nccl_tuner_force"));
    a.outcome = reinterpret_cast<int (*)()>(dlsym(handle, "at_nccl_tuner_forced_outcome"));
    a.algo_name = reinterpret_cast<const char* (*)(int)>(dlsym(handle, "at_nccl_tuner_algo_name"));
    a.proto_name =
        reinterpret_cast<const char* (*)(int)>(dlsym(handle, "at_nccl_tuner_proto_name"));
    if (a.force == nullptr || a.outcome == nullptr) {
      *load_error = absl::StrCat(path, " has no at_nccl_tuner_force/at_nccl_tuner_forced_outcome");
      return absl::FailedPreconditionError(*load_error);
    }
    // NCCL loads the same file (the same copy: dlopen by path), and the
    // host's table stays out of this process's measurements.
    setenv("NCCL_TUNER_PLUGIN", path.c_str(), 1);
    setenv("AUTOTUNED_NCCL_TABLE", "off", 1);  // AT_NCCL_TUNER_TABLE_OFF
    api = a;
    load_error->clear();
    return absl::OkStatus();
  }
  *load_error = absl::StrCat("no ", kLibrary, " (looked at ", tried, ")");
  return absl::NotFoundError(*load_error);
}

absl::Status RunWithChoice(const NcclChoice& choice, const char* call,
                           absl::FunctionRef<absl::Status()> enqueue) {
  if (!choice.forced()) return enqueue();
  if (api.force == nullptr) {
    return absl::FailedPreconditionError(absl::StrCat(
        "NCCL with ", choice.ToString(), " needs the NCCL tuner plugin: ", *load_error));
  }
  api.force(choice.algo, choice.proto, choice.channels);
  const absl::Status status = enqueue();
  const int outcome = api.outcome();
  api.force(-1, -1, 0);
  if (!status.ok()) return status;
  if (outcome == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        call, " did not consult the tuner plugin on the calling thread, so ", choice.ToString(),
        " could not be applied (non-blocking communicators?)"));
  }
  if (outcome < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "NCCL does not offer ", choice.ToString(), " for this ", call, " on this group"));
  }
  return absl::OkStatus();
}

}  // namespace autotuned::cuda
