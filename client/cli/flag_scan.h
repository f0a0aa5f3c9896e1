// A dry run of absl::ParseCommandLine over the registered flags, so that a
// bad command line is a usage error (exit status 2) reported our way instead
// of absl's exit(1), and so that the CLI knows which flags were given.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace autotuned {
namespace cli {

struct ScannedArgs {
  std::set<std::string> given;          // flag names, without dashes/"no"
  std::vector<std::string> positional;  // in order, "--" dropped
};

// Reads `args` (argv without the program name) with absl's syntax: "--name",
// "-name", "--name=value", "--name value" (non-boolean flags), "--noname"
// (boolean flags), "--" ending the flags. INVALID_ARGUMENT for an unknown
// flag (naming the nearest registered one when it is at most two edits away),
// a missing value, or a value the flag's type rejects (saying what the type
// takes; the flag is left set to it, as the real parse will).
absl::StatusOr<ScannedArgs> ScanFlags(const std::vector<std::string>& args);

}  // namespace cli
}  // namespace autotuned
