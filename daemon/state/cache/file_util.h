// Small POSIX file helpers for the result cache. Every error is a status
// with the errno's code and a message naming the path.
//
// Thread-safety: no shared state; safe from any thread (the caller keeps
// concurrent writers of one path apart).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/regular_file.h"

namespace autotuned {
namespace cache_internal {

// mkdir -p: creates `path` and missing parents with `mode` (less the umask).
// OK when it already exists as a directory; FAILED_PRECONDITION when it
// exists as something else.
absl::Status MakeDirs(const std::string& path, mode_t mode);

// The names in directory `dir` (not "." or ".."), sorted.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir);

// The whole content of the regular file at `path`, at most `max_bytes`
// long, a symbolic link not followed (common/regular_file.h says how it
// fails).
inline absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes) {
  return autotuned::ReadRegularFile(path, max_bytes, /*follow_links=*/false);
}

// Creates `path` (which must not exist), writes `bytes`, fsyncs and closes
// it. On failure, removes what it created.
absl::Status WriteNewFileSynced(const std::string& path,
                                const std::string& bytes, mode_t mode);

// fsync of directory `dir`, making renames and removals in it durable.
absl::Status SyncDir(const std::string& dir);

// Removes the file at `path`. NOT_FOUND when it does not exist.
absl::Status RemoveFile(const std::string& path);

}  // namespace cache_internal
}  // namespace autotuned
