// Reading a small file that must be a regular one (a configuration, a cache
// entry) without being stalled or flooded by what was put in its place.
//
// Thread-safety: no shared state; safe from any thread.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"

namespace autotuned {

// What `mode` is, for messages: "a directory", "a FIFO", "a socket", ...
const char* FileKind(mode_t mode);

// The whole content of the regular file at `path`, at most `max_bytes`
// long, read at most one byte past that should it grow meanwhile. Opened
// without blocking (a FIFO or device never stalls the caller), following a
// symbolic link only where `follow_links`. Messages name the file as
// `what` + `path` (`what`: e.g. "config file ", or ""):
// FAILED_PRECONDITION "<file> is a FIFO, not a regular file" (a symbolic
// link, unfollowed, too); RESOURCE_EXHAUSTED "<file> holds N bytes, over
// the limit of M" or "... grew over the limit of M bytes while read";
// otherwise the errno's code, "cannot open|stat|read <file>".
absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes,
                                            bool follow_links, const std::string& what = "");

}  // namespace autotuned
