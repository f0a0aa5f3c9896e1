#include "daemon/common/self_exe.h"

#include <limits.h>
#include <unistd.h>

namespace autotuned {

std::string SelfExe() {
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "/proc/self/exe";
}

std::string SelfExeDir() {
  const std::string exe = SelfExe();
  const size_t slash = exe.rfind('/');
  return slash == std::string::npos ? "." : exe.substr(0, slash);
}

}  // namespace autotuned
