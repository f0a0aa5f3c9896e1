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

namespace autotuned {
namespace cache_internal {

// mkdir -p: creates `path` and missing parents with `mode` (less the umask).
// OK when it already exists as a directory; FAILED_PRECONDITION when it
// exists as something else.
absl::Status MakeDirs(const std::string& path, mode_t mode);

// The names in directory `dir` (not "." or ".."), sorted.
absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir);

// The whole content of the regular file at `path`, at most `max_bytes`
// long. Opened without following a symbolic link and without blocking (a
// FIFO or device never stalls the caller): FAILED_PRECONDITION naming what
// `path` is when it is not a regular file (a symbolic link, FIFO, socket,
// device, directory), RESOURCE_EXHAUSTED when it holds more than `max_bytes`;
// otherwise the errno's code.
absl::StatusOr<std::string> ReadRegularFile(const std::string& path,
                                            size_t max_bytes);

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
