// The project's release version: the daemon reports it in NodeInfo,
// `autotunectl --version` prints it.
#pragma once

namespace autotuned {
inline constexpr char kDaemonVersion[] = "0.1.0";
}  // namespace autotuned
