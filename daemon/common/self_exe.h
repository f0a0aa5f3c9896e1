// This process's executable: for the GPU worker the daemon starts (its own
// binary) and for what the worker finds beside it (the NCCL tuner plugin).
#pragma once

#include <string>

namespace autotuned {

// The path /proc/self/exe names; "/proc/self/exe" itself when it cannot be read.
std::string SelfExe();

// The directory of SelfExe() ("." when it has none).
std::string SelfExeDir();

}  // namespace autotuned
