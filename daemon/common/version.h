// The daemon's release version, reported by NodeInfo and --version.
#pragma once

namespace autotuned {
inline constexpr char kDaemonVersion[] = "0.1.0";
}  // namespace autotuned
