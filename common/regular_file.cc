#include "common/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace autotuned {

const char* FileKind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, size_t max_bytes,
                                            bool follow_links, const std::string& what) {
  const std::string file = what + path;
  const int fd = ::open(path.c_str(),
                        O_RDONLY | O_NONBLOCK | O_CLOEXEC | (follow_links ? 0 : O_NOFOLLOW));
  if (fd < 0 && errno == ELOOP && !follow_links) {
    return absl::FailedPreconditionError(
        absl::StrCat(file, " is a symbolic link, not a regular file"));
  }
  if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open ", file));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return absl::ErrnoToStatus(e, absl::StrCat("cannot stat ", file));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(file, " is ", FileKind(st.st_mode), ", not a regular file"));
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat(file, " holds ", st.st_size, " bytes, over the limit of ", max_bytes));
  }
  std::string bytes;
  char buf[64 * 1024];
  for (;;) {
    const size_t want = std::min(sizeof(buf), max_bytes + 1 - bytes.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int e = errno;
      ::close(fd);
      return absl::ErrnoToStatus(e, absl::StrCat("cannot read ", file));
    }
    if (n == 0) break;
    bytes.append(buf, static_cast<size_t>(n));
    if (bytes.size() > max_bytes) {
      ::close(fd);
      return absl::ResourceExhaustedError(
          absl::StrCat(file, " grew over the limit of ", max_bytes, " bytes while read"));
    }
  }
  ::close(fd);
  return bytes;
}

}  // namespace autotuned
