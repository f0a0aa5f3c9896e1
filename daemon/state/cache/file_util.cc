#include "daemon/state/cache/file_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace autotuned {
namespace cache_internal {
namespace {

absl::Status Errno(int e, const char* what, const std::string& path) {
  return absl::ErrnoToStatus(e, absl::StrCat(what, " ", path));
}

}  // namespace

absl::Status MakeDirs(const std::string& path, mode_t mode) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  // Every prefix ending before a '/', then the whole path.
  for (size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    const std::string prefix =
        pos == std::string::npos ? path : path.substr(0, pos);
    if (!prefix.empty() && prefix.back() != '/' &&
        ::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return Errno(errno, "cannot create directory", prefix);
    }
    if (pos == std::string::npos) break;
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Errno(errno, "cannot stat", path);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ListDir(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Errno(errno, "cannot list directory", dir);
  std::vector<std::string> names;
  errno = 0;
  while (const struct dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(name);
    errno = 0;
  }
  const int read_errno = errno;
  ::closedir(d);
  if (read_errno != 0) return Errno(read_errno, "cannot list directory", dir);
  std::sort(names.begin(), names.end());
  return names;
}

absl::Status WriteNewFileSynced(const std::string& path,
                                const std::string& bytes, mode_t mode) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return Errno(errno, "cannot create", path);
  const char* p = bytes.data();
  size_t left = bytes.size();
  absl::Status status;
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      status = Errno(errno, "cannot write", path);
      break;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  if (status.ok() && ::fsync(fd) != 0)
    status = Errno(errno, "cannot fsync", path);
  if (::close(fd) != 0 && status.ok())
    status = Errno(errno, "cannot close", path);
  if (!status.ok()) ::unlink(path.c_str());
  return status;
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(errno, "cannot open directory", dir);
  absl::Status status;
  if (::fsync(fd) != 0) status = Errno(errno, "cannot fsync directory", dir);
  ::close(fd);
  return status;
}

absl::Status RemoveFile(const std::string& path) {
  if (::unlink(path.c_str()) != 0) return Errno(errno, "cannot remove", path);
  return absl::OkStatus();
}

}  // namespace cache_internal
}  // namespace autotuned
