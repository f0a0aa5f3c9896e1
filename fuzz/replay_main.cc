// A main for a libFuzzer target built without libFuzzer: runs the target's
// LLVMFuzzerTestOneInput once on every stored input, so that an input that
// once crashed or broke a checked contract fails the ordinary test suite
// (fuzz/BUILD links it into one cc_test per target; no clang needed).
//
//   replay PATH...
//
// A PATH is a file (one input) or a directory (every regular file below it,
// in name order). Exits 0 when every input ran; a crash or a broken check in
// the target aborts the process, after the input's path is written to
// stderr. Exits 1 when it is given no input at all, so that a corpus lost
// from the build cannot pass as an empty replay.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
// Optional in a target, as with libFuzzer.
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

// The input being run, for the fatal-signal handler (it only reads it).
const char* volatile current_input = nullptr;

void WriteAll(const char* s) {
  size_t n = strlen(s);
  while (n > 0) {
    const ssize_t w = write(STDERR_FILENO, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// Names the input, then dies of the same signal (default action restored).
void OnFatalSignal(int sig) {
  WriteAll("replay: fatal signal on input ");
  WriteAll(current_input != nullptr ? current_input : "(none)");
  WriteAll("\n");
  signal(sig, SIG_DFL);
  raise(sig);
}

bool IsDirectory(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Appends the regular files below `dir` (following links, as Bazel's
// runfiles are links) in name order.
bool ListFiles(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  std::vector<std::string> names;
  while (const dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::string path = dir + "/" + name;
    if (IsDirectory(path)) {
      if (!ListFiles(path, out)) return false;
    } else {
      out->push_back(path);
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    const std::string path = argv[i];
    if (IsDirectory(path)) {
      if (!ListFiles(path, &inputs)) {
        fprintf(stderr, "replay: cannot list %s\n", path.c_str());
        return 1;
      }
    } else {
      inputs.push_back(path);
    }
  }
  if (inputs.empty()) {
    fprintf(stderr, "replay: no inputs (usage: %s FILE_OR_DIR...)\n", argv[0]);
    return 1;
  }
  for (int sig : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) signal(sig, OnFatalSignal);

  size_t bytes = 0;
  for (const std::string& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      fprintf(stderr, "replay: cannot read %s\n", path.c_str());
      return 1;
    }
    const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    current_input = path.c_str();
    LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(data.data()), data.size());
    current_input = nullptr;
    bytes += data.size();
  }
  printf("replay: %zu inputs (%zu bytes), all passed\n", inputs.size(), bytes);
  return 0;
}
