// libautotuned_nccl_tuner.so driven as NCCL drives it: dlopen, dlsym of the
// plugin structs, init, getCollInfo with a cost table laid out as NCCL lays
// it out (float[algo][proto] passed as float**), finalize.
#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <mutex>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "client/nccl_tuner/nccl_tuner.h"
#include "client/nccl_tuner/nccl_tuner_abi.h"

#include <catch2/catch.hpp>

namespace {

constexpr int kAlgos = AT_NCCL_ALGO_COUNT;
constexpr int kProtos = AT_NCCL_PROTO_COUNT;

struct LogLine {
  at_nccl_log_level_t level;
  unsigned long flags;
  std::string text;
};

std::mutex log_mu;
std::vector<LogLine> log_lines;

extern "C" void CaptureLog(at_nccl_log_level_t level, unsigned long flags, const char* /*file*/,
                           int /*line*/, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard<std::mutex> lock(log_mu);
  log_lines.push_back({level, flags, buf});
}

std::vector<LogLine> TakeLogs() {
  std::lock_guard<std::mutex> lock(log_mu);
  std::vector<LogLine> out;
  out.swap(log_lines);
  return out;
}

struct Library {
  void* handle = nullptr;
  const at_nccl_tuner_v5_t* v5 = nullptr;
  const at_nccl_tuner_v4_t* v4 = nullptr;
  const at_nccl_tuner_v3_t* v3 = nullptr;
  void (*force)(int, int, int) = nullptr;
  int (*outcome)() = nullptr;
  const char* (*algo_name)(int) = nullptr;
  const char* (*proto_name)(int) = nullptr;
};

template <typename T>
T Sym(void* handle, const char* name) {
  return reinterpret_cast<T>(dlsym(handle, name));
}

const Library& Lib() {
  static const Library lib = [] {
    Library l;
    const char* path = std::getenv("AUTOTUNED_NCCL_TUNER_LIB");
    REQUIRE(path != nullptr);
    // A path with a slash: dlopen takes it as is (relative to the runfiles).
    std::string p = std::string(path).find('/') == std::string::npos ? "./" + std::string(path)
                                                                     : std::string(path);
    l.handle = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (l.handle == nullptr) FAIL("dlopen " << p << ": " << dlerror());
    l.v5 = Sym<const at_nccl_tuner_v5_t*>(l.handle, "ncclTunerPlugin_v5");
    l.v4 = Sym<const at_nccl_tuner_v4_t*>(l.handle, "ncclTunerPlugin_v4");
    l.v3 = Sym<const at_nccl_tuner_v3_t*>(l.handle, "ncclTunerPlugin_v3");
    l.force = Sym<void (*)(int, int, int)>(l.handle, "at_nccl_tuner_force");
    l.outcome = Sym<int (*)()>(l.handle, "at_nccl_tuner_forced_outcome");
    l.algo_name = Sym<const char* (*)(int)>(l.handle, "at_nccl_tuner_algo_name");
    l.proto_name = Sym<const char* (*)(int)>(l.handle, "at_nccl_tuner_proto_name");
    REQUIRE(l.v5 != nullptr);
    REQUIRE(l.v4 != nullptr);
    REQUIRE(l.v3 != nullptr);
    REQUIRE(l.force != nullptr);
    REQUIRE(l.outcome != nullptr);
    REQUIRE(l.algo_name != nullptr);
    REQUIRE(l.proto_name != nullptr);
    return l;
  }();
  return lib;
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string WriteTable(const std::string& name, const std::string& text) {
  std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

// The plugin versions NCCL may pick, behind one interface.
enum class Version { kV5, kV4, kV3 };

struct Comm {
  Version version;
  void* ctx = nullptr;
  std::vector<LogLine> init_logs;

  Comm(Version v, const std::string& table_path, size_t nranks, size_t nnodes,
       at_nccl_logger_t log = CaptureLog)
      : version(v) {
    REQUIRE(setenv("AUTOTUNED_NCCL_TABLE", table_path.c_str(), 1) == 0);
    TakeLogs();
    at_nccl_result_t r = AT_NCCL_SUCCESS;
    switch (v) {
      case Version::kV5:
        r = Lib().v5->init(&ctx, 0x1234, nranks, nnodes, log, nullptr, nullptr);
        break;
      case Version::kV4: r = Lib().v4->init(nranks, nnodes, log, &ctx); break;
      case Version::kV3: r = Lib().v3->init(nranks, nnodes, log, &ctx); break;
    }
    REQUIRE(r == AT_NCCL_SUCCESS);
    REQUIRE(ctx != nullptr);
    init_logs = TakeLogs();
  }
  ~Comm() {
    switch (version) {
      case Version::kV5: CHECK(Lib().v5->finalize(ctx) == AT_NCCL_SUCCESS); break;
      case Version::kV4: CHECK(Lib().v4->destroy(ctx) == AT_NCCL_SUCCESS); break;
      case Version::kV3: CHECK(Lib().v3->destroy(ctx) == AT_NCCL_SUCCESS); break;
    }
  }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  at_nccl_result_t GetCollInfo(at_nccl_func_t f, size_t bytes, float (*cost)[kProtos],
                               int* channels) {
    float** table = reinterpret_cast<float**>(cost);
    switch (version) {
      case Version::kV5:
        return Lib().v5->getCollInfo(ctx, f, bytes, 1, table, kAlgos, kProtos, 0, channels);
      case Version::kV4:
        return Lib().v4->getCollInfo(ctx, f, bytes, 1, table, kAlgos, kProtos, 0, channels);
      case Version::kV3:
        return Lib().v3->getCollInfo(ctx, f, bytes, 1, table, kAlgos, kProtos, channels);
    }
    return AT_NCCL_SUCCESS;
  }
};

// NCCL's cost table for a call: positive times, with the combinations NCCL
// would not offer at -1 (collnet and nvls: no such hardware; tree/ll128).
void FillCosts(float (*cost)[kProtos]) {
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) cost[a][p] = 10.0f + 3.0f * a + p;
  }
  for (int a : {AT_NCCL_ALGO_COLLNET_DIRECT, AT_NCCL_ALGO_COLLNET_CHAIN, AT_NCCL_ALGO_NVLS,
                AT_NCCL_ALGO_NVLS_TREE}) {
    for (int p = 0; p < kProtos; ++p) cost[a][p] = -1.0f;
  }
  cost[AT_NCCL_ALGO_TREE][AT_NCCL_PROTO_LL128] = -1.0f;
}

// What a getCollInfo steered: the entry set to 0.0 (-1, -1 if none) and the
// channel count (0 if left to NCCL). Every other entry must be unchanged.
struct Choice {
  int algo = -1;
  int proto = -1;
  int channels = 0;
  bool operator==(const Choice& o) const {
    return algo == o.algo && proto == o.proto && channels == o.channels;
  }
};

std::ostream& operator<<(std::ostream& os, const Choice& c) {
  return os << "{algo " << c.algo << ", proto " << c.proto << ", channels " << c.channels << "}";
}

const Choice kNothing{};

// A node with collnet (SHARP) and NVLink multicast: every entry offered.
void FillAllOffered(float (*cost)[kProtos]) {
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) cost[a][p] = 10.0f + 3.0f * a + p;
  }
}

Choice Ask(Comm& comm, at_nccl_func_t f, size_t bytes, void (*fill)(float (*)[kProtos]) = FillCosts) {
  float cost[kAlgos][kProtos];
  float before[kAlgos][kProtos];
  fill(cost);
  fill(before);
  int channels = 0;
  REQUIRE(comm.GetCollInfo(f, bytes, cost, &channels) == AT_NCCL_SUCCESS);
  Choice c;
  c.channels = channels;
  int changed = 0;
  for (int a = 0; a < kAlgos; ++a) {
    for (int p = 0; p < kProtos; ++p) {
      if (cost[a][p] == before[a][p]) continue;
      ++changed;
      CHECK(before[a][p] >= 0.0f);  // an entry NCCL does not offer stays -1
      CHECK(cost[a][p] == 0.0f);
      c.algo = a;
      c.proto = p;
    }
  }
  CHECK(changed <= 1);
  return c;
}

const at_nccl_func_t kAllFuncs[] = {AT_NCCL_FUNC_BROADCAST, AT_NCCL_FUNC_REDUCE,
                                    AT_NCCL_FUNC_ALL_GATHER, AT_NCCL_FUNC_REDUCE_SCATTER,
                                    AT_NCCL_FUNC_ALL_REDUCE};

bool Contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

const char kHeader[] = "autotuned-nccl-table 1\nidentity 0123456789abcdef\n";

// Rows of several shapes; the 2-rank, 1-node communicator keeps nine.
const char kTable[] =
    "autotuned-nccl-table 1\n"
    "# made for a test\n"
    "\n"
    "identity ab12cd34\n"
    "all_reduce 2 1 0 1023 ring ll 0\n"
    "  # an indented comment\n"
    "all_reduce 2 1 1024 65535 tree simple 8\n"
    "all_reduce\t2 1 1048576 1048576 ring ll128 16\n"
    "all_reduce 2 1 1048577 9223372036854775807 pat simple 0\n"
    "all_gather 2 1 0 1000000 ring simple 4\n"
    "reduce_scatter 2 1 0 100 nvls simple 0\n"
    "broadcast 2 1 0 100 default default 0\n"
    "reduce 2 1 0 100 default default 12\n"
    "reduce 2 1 101 200 tree ll 0\n"
    "all_reduce 4 1 0 9223372036854775807 tree simple 2\n"
    "all_reduce 2 2 0 9223372036854775807 tree ll 3\n";

Choice Steers(int algo, int proto, int channels = 0) { return Choice{algo, proto, channels}; }

}  // namespace

TEST_CASE("rows are chosen by collective and size, bounds inclusive, in every ABI version") {
  std::string path = WriteTable("table_ok", kTable);
  for (Version v : {Version::kV5, Version::kV4, Version::kV3}) {
    INFO("version " << static_cast<int>(v));
    Comm comm(v, path, 2, 1);
    REQUIRE(comm.init_logs.size() == 1);
    const LogLine& init = comm.init_logs[0];
    CHECK(init.level == AT_NCCL_LOG_INFO);
    CHECK(init.flags == AT_NCCL_LOG_FLAG_TUNING);
    INFO(init.text);
    CHECK(Contains(init.text, "9 of 11 rows for 2 ranks, 1 node from " + path));
    CHECK(Contains(init.text, "identity ab12cd34"));

    const int ring = AT_NCCL_ALGO_RING, tree = AT_NCCL_ALGO_TREE, pat = AT_NCCL_ALGO_PAT;
    const int ll = AT_NCCL_PROTO_LL, ll128 = AT_NCCL_PROTO_LL128, simple = AT_NCCL_PROTO_SIMPLE;
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == Steers(ring, ll));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 1023) == Steers(ring, ll));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 1024) == Steers(tree, simple, 8));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 65535) == Steers(tree, simple, 8));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 65536) == kNothing);
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 1048575) == kNothing);
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 1048576) == Steers(ring, ll128, 16));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 1048577) == Steers(pat, simple));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, size_t{1} << 62) == Steers(pat, simple));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_GATHER, 0) == Steers(ring, simple, 4));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_GATHER, 1000000) == Steers(ring, simple, 4));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_GATHER, 1000001) == kNothing);
    // default/default: NCCL's algorithm and protocol, the row's channels.
    CHECK(Ask(comm, AT_NCCL_FUNC_BROADCAST, 50) == kNothing);
    CHECK(Ask(comm, AT_NCCL_FUNC_REDUCE, 50) == Steers(-1, -1, 12));
    CHECK(Ask(comm, AT_NCCL_FUNC_REDUCE, 101) == Steers(tree, ll));
    CHECK(Ask(comm, AT_NCCL_FUNC_REDUCE, 201) == kNothing);
    CHECK(TakeLogs().empty());

    // nvls is not offered (-1): the table and the channels stay NCCL's, and
    // that is logged once for the communicator.
    CHECK(Ask(comm, AT_NCCL_FUNC_REDUCE_SCATTER, 50) == kNothing);
    CHECK(Ask(comm, AT_NCCL_FUNC_REDUCE_SCATTER, 100) == kNothing);
    std::vector<LogLine> logs = TakeLogs();
    REQUIRE(logs.size() == 1);
    CHECK(logs[0].level == AT_NCCL_LOG_INFO);
    CHECK(Contains(logs[0].text, "line 11 (nvls/simple) not offered"));
  }
}

TEST_CASE("a communicator uses the rows of its own ranks and nodes") {
  std::string path = WriteTable("table_shapes", kTable);
  {
    Comm comm(Version::kV5, path, 4, 1);
    REQUIRE(comm.init_logs.size() == 1);
    CHECK(Contains(comm.init_logs[0].text, "1 of 11 rows for 4 ranks, 1 node from"));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) ==
          Steers(AT_NCCL_ALGO_TREE, AT_NCCL_PROTO_SIMPLE, 2));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_GATHER, 0) == kNothing);
  }
  {
    Comm comm(Version::kV5, path, 2, 2);
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 1048576) ==
          Steers(AT_NCCL_ALGO_TREE, AT_NCCL_PROTO_LL, 3));
  }
  {
    Comm comm(Version::kV4, path, 8, 1);
    REQUIRE(comm.init_logs.size() == 1);
    CHECK(comm.init_logs[0].level == AT_NCCL_LOG_INFO);
    CHECK(Contains(comm.init_logs[0].text, "0 of 11 rows for 8 ranks, 1 node"));
    CHECK(Contains(comm.init_logs[0].text, "NCCL's own choices"));
    for (at_nccl_func_t f : kAllFuncs) CHECK(Ask(comm, f, 0) == kNothing);
  }
}

TEST_CASE("no table file: NCCL's own choices, one INFO line") {
  std::string path = TempPath("no_such_table");
  std::remove(path.c_str());
  Comm comm(Version::kV5, path, 2, 1);
  REQUIRE(comm.init_logs.size() == 1);
  CHECK(comm.init_logs[0].level == AT_NCCL_LOG_INFO);
  CHECK(Contains(comm.init_logs[0].text,
                 "no table at " + path + " (No such file or directory): NCCL's own choices"));
  for (at_nccl_func_t f : kAllFuncs) {
    for (size_t bytes : {size_t{0}, size_t{1024}, size_t{1} << 30}) {
      CHECK(Ask(comm, f, bytes) == kNothing);
    }
  }
}

TEST_CASE("AUTOTUNED_NCCL_TABLE=off reads no file, even one named off") {
  // A valid table at ./off must not be read.
  {
    std::ofstream f("off");
    f << "autotuned-nccl-table 1\nidentity ab\nall_reduce 2 1 0 100 ring ll 0\n";
  }
  Comm comm(Version::kV5, "off", 2, 1);
  REQUIRE(comm.init_logs.size() == 1);
  CHECK(comm.init_logs[0].level == AT_NCCL_LOG_INFO);
  CHECK(Contains(comm.init_logs[0].text, "table off"));
  CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 10) == kNothing);
  std::remove("off");
}

namespace {

struct Bad {
  const char* name;
  std::string text;
  int line;  // 0: the reason names no line
  const char* reason;
};

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string Row(int i) {
  return "all_reduce 2 1 " + std::to_string(i * 10) + " " + std::to_string(i * 10 + 9) +
         " ring ll 0\n";
}

std::string Rows(int n) {
  std::string out = kHeader;
  for (int i = 0; i < n; ++i) out += Row(i);
  return out;
}

// A good row first, so that rejecting the file is what leaves it unsteered.
const std::string kGood = std::string(kHeader) + "all_reduce 2 1 0 100 ring ll 0\n";

std::vector<Bad> BadFiles() {
  return {
      {"empty", "", 1, "empty file"},
      {"magic", "autotuned-nccl-tabel 1\nidentity ab\n", 1, "expected 'autotuned-nccl-table 1'"},
      {"magic_extra", "autotuned-nccl-table 1 x\nidentity ab\n", 1, "expected"},
      {"version", "autotuned-nccl-table 2\nidentity ab\n", 1, "version '2'"},
      {"comment_first", "# x\nautotuned-nccl-table 1\nidentity ab\n", 1, "expected"},
      {"no_identity", "autotuned-nccl-table 1\n# only a comment\n", 2, "no identity line"},
      {"row_before_identity", "autotuned-nccl-table 1\nall_reduce 2 1 0 1 ring ll 0\n", 2,
       "before the rows"},
      {"identity_upper", "autotuned-nccl-table 1\nidentity AB12\n", 2, "identity:"},
      {"identity_long", "autotuned-nccl-table 1\nidentity " + std::string(65, 'a') + "\n", 2,
       "identity:"},
      {"identity_empty", "autotuned-nccl-table 1\nidentity\n", 2, "identity:"},
      {"identity_twice", kGood + "identity cd\n", 4, "a second identity"},
      {"collective", kGood + "all_to_all 2 1 200 300 ring ll 0\n", 4, "collective 'all_to_all'"},
      {"nranks_zero", kGood + "all_gather 0 1 0 1 ring ll 0\n", 4, "nranks '0'"},
      {"nranks_text", kGood + "all_gather two 1 0 1 ring ll 0\n", 4, "nranks 'two'"},
      {"nranks_huge", kGood + "all_gather 9223372036854775808 1 0 1 ring ll 0\n", 4,
       "nranks '9223372036854775808'"},
      {"nnodes_zero", kGood + "all_gather 2 0 0 1 ring ll 0\n", 4, "nnodes '0'"},
      {"min_negative", kGood + "all_gather 2 1 -1 1 ring ll 0\n", 4, "min_bytes '-1'"},
      {"min_plus", kGood + "all_gather 2 1 +1 1 ring ll 0\n", 4, "min_bytes '+1'"},
      {"max_huge", kGood + "all_gather 2 1 0 9223372036854775808 ring ll 0\n", 4,
       "max_bytes '9223372036854775808'"},
      {"max_unit", kGood + "all_gather 2 1 0 1MiB ring ll 0\n", 4, "max_bytes '1MiB'"},
      {"min_above_max", kGood + "all_gather 2 1 10 9 ring ll 0\n", 4,
       "min_bytes 10 is more than max_bytes 9"},
      {"algo", kGood + "all_gather 2 1 0 1 rings ll 0\n", 4, "algo 'rings'"},
      {"algo_case", kGood + "all_gather 2 1 0 1 Ring ll 0\n", 4, "algo 'Ring'"},
      {"proto", kGood + "all_gather 2 1 0 1 ring ll64 0\n", 4, "proto 'll64'"},
      {"algo_only_default", kGood + "all_gather 2 1 0 1 default ll 0\n", 4, "both or neither"},
      {"proto_only_default", kGood + "all_gather 2 1 0 1 ring default 0\n", 4, "both or neither"},
      {"channels_high", kGood + "all_gather 2 1 0 1 ring ll 65\n", 4, "channels '65'"},
      {"channels_negative", kGood + "all_gather 2 1 0 1 ring ll -1\n", 4, "channels '-1'"},
      {"fields_few", kGood + "all_gather 2 1 0 1 ring ll\n", 4, "7 fields, expected 8"},
      {"fields_many", kGood + "all_gather 2 1 0 1 ring ll 0 # why\n", 4, "more than 8 fields"},
      {"overlap", kGood + "all_reduce 2 1 50 200 tree simple 0\n", 4, "overlap line 3"},
      {"overlap_bound", kGood + "all_reduce 2 1 100 200 tree simple 0\n", 4, "overlap line 3"},
      // Overlapping rows of another shape reject the file too.
      {"overlap_other_shape",
       kGood + "all_gather 8 2 0 10 ring ll 0\n# gap\nall_gather 8 2 5 7 ring ll 0\n", 6,
       "overlap line 4"},
      {"overlap_earlier_row",
       std::string(kHeader) + "all_reduce 2 1 500 600 ring ll 0\nall_reduce 2 1 0 1000 ring ll 0\n",
       4, "overlap line 3"},
      {"rows", Rows(4097), 4099, "more than 4096 rows"},
      {"line_long", kGood + "#" + std::string(512, 'x') + "\n", 4, "longer than 512 bytes"},
      {"non_ascii", kGood + "# caf\xc3\xa9\n", 4, "byte 0xc3 at column 6"},
      {"nul", kGood + std::string("all_gather 2 1 0 1 ring ll 0\0\n", 30), 4, "byte 0x00"},
      {"carriage_return", std::string(kHeader) + "all_reduce 2 1 0 100 ring ll 0\r\n", 3,
       "byte 0x0d"},
      // A file cut short: its last row would be read with a shortened number
      // (channels 16 as 1, max_bytes 1048575 as 10485).
      {"no_final_newline", kGood.substr(0, kGood.size() - 1), 3, "no newline at its end"},
      {"cut_mid_row", kGood + "all_reduce 2 1 200 1048575 ring simple 1", 4,
       "no newline at its end"},
      {"cut_mid_comment", kGood + "# a comm", 4, "no newline at its end"},
      // Counts NCCL would take unchecked (a crash where it exceeds the
      // communicator's channels).
      {"collnet_direct_channels", kGood + "all_reduce 2 2 0 100 collnet_direct simple 8\n", 4,
       "channels 8 with collnet_direct"},
      {"collnet_chain_channels", kGood + "all_reduce 2 1 200 300 collnet_chain ll 1\n", 4,
       "channels 1 with collnet_chain"},
      {"nvls_nodes_channels", kGood + "all_reduce 4 2 0 100 nvls simple 16\n", 4,
       "channels 16 with nvls over 2 nodes"},
      {"oversize", kGood + Repeat("#" + std::string(510, '-') + "\n", 2049), 0, "more than 1 MiB"},
  };
}

}  // namespace

TEST_CASE("a bad file is rejected whole: one WARN line naming path, line and reason") {
  for (const Bad& bad : BadFiles()) {
    INFO(bad.name);
    std::string path = WriteTable(std::string("bad_") + bad.name, bad.text);
    Comm comm(Version::kV5, path, 2, 1);
    REQUIRE(comm.init_logs.size() == 1);
    const LogLine& log = comm.init_logs[0];
    INFO(log.text);
    CHECK(log.level == AT_NCCL_LOG_WARN);
    CHECK(log.flags == AT_NCCL_LOG_FLAG_TUNING);
    CHECK(Contains(log.text, "table " + path + " rejected"));
    if (bad.line > 0) CHECK(Contains(log.text, "line " + std::to_string(bad.line) + ": "));
    CHECK(Contains(log.text, bad.reason));
    for (at_nccl_func_t f : kAllFuncs) {
      for (size_t bytes : {size_t{0}, size_t{50}, size_t{100}, size_t{1} << 20}) {
        CHECK(Ask(comm, f, bytes) == kNothing);
      }
    }
  }
}

TEST_CASE("the limits themselves are accepted") {
  SECTION("4096 rows") {
    Comm comm(Version::kV5, WriteTable("rows_4096", Rows(4096)), 2, 1);
    REQUIRE(comm.init_logs.size() == 1);
    CHECK(Contains(comm.init_logs[0].text, "4096 of 4096 rows"));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 40959) == Steers(AT_NCCL_ALGO_RING, AT_NCCL_PROTO_LL));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 40960) == kNothing);
  }
  SECTION("a line of 512 bytes, a file of 1 MiB, the widest numbers") {
    std::string text = kGood + "#" + std::string(511, 'x') + "\n";
    text += "all_gather 64 8 9223372036854775806 9223372036854775807 nvls_tree ll128 64\n";
    std::string filler = "#" + std::string(510, '-') + "\n";
    std::string comments;
    while (text.size() + comments.size() + filler.size() <= 1024 * 1024) comments += filler;
    size_t rest = 1024 * 1024 - text.size() - comments.size();
    if (rest > 0) comments += std::string(rest - 1, '#') + "\n";
    text.insert(kGood.size(), comments);
    REQUIRE(text.size() == 1024 * 1024);
    Comm comm(Version::kV5, WriteTable("limits", text), 64, 8);
    REQUIRE(comm.init_logs.size() == 1);
    INFO(comm.init_logs[0].text);
    CHECK(comm.init_logs[0].level == AT_NCCL_LOG_INFO);
    CHECK(Contains(comm.init_logs[0].text, "1 of 2 rows for 64 ranks, 8 nodes"));
    float cost[kAlgos][kProtos];
    for (auto& row : cost) {
      for (float& c : row) c = 5.0f;
    }
    int channels = 0;
    CHECK(comm.GetCollInfo(AT_NCCL_FUNC_ALL_GATHER, size_t{9223372036854775807ULL}, cost,
                           &channels) == AT_NCCL_SUCCESS);
    CHECK(cost[AT_NCCL_ALGO_NVLS_TREE][AT_NCCL_PROTO_LL128] == 0.0f);
    CHECK(channels == 64);
  }
}

TEST_CASE("a directory or an unreadable path is rejected, not waited on") {
  std::string dir = TempPath("");
  Comm comm(Version::kV5, dir, 2, 1);
  REQUIRE(comm.init_logs.size() == 1);
  CHECK(comm.init_logs[0].level == AT_NCCL_LOG_WARN);
  CHECK(Contains(comm.init_logs[0].text, "not a regular file"));
  CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == kNothing);
}

TEST_CASE("a NULL logger is allowed") {
  std::string good = WriteTable("null_log_good", kTable);
  std::string bad = WriteTable("null_log_bad", "nonsense\n");
  {
    Comm comm(Version::kV5, good, 2, 1, nullptr);
    CHECK(comm.init_logs.empty());
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == Steers(AT_NCCL_ALGO_RING, AT_NCCL_PROTO_LL));
    CHECK(Ask(comm, AT_NCCL_FUNC_REDUCE_SCATTER, 0) == kNothing);  // would log
  }
  {
    Comm comm(Version::kV4, bad, 2, 1, nullptr);
    CHECK(comm.init_logs.empty());
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == kNothing);
  }
  CHECK(TakeLogs().empty());
}

TEST_CASE("a forced choice wins over the table on its own thread only") {
  const Library& lib = Lib();
  lib.force(-1, -1, 0);  // Catch2 runs this case once per section, on this thread
  Comm comm(Version::kV5, WriteTable("table_force", kTable), 2, 1);
  const Choice table_choice = Steers(AT_NCCL_ALGO_RING, AT_NCCL_PROTO_LL);
  REQUIRE(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == table_choice);
  CHECK(lib.outcome() == 0);

  lib.force(AT_NCCL_ALGO_TREE, AT_NCCL_PROTO_SIMPLE, 0);
  CHECK(lib.outcome() == 0);  // nothing ran since the force
  CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == Steers(AT_NCCL_ALGO_TREE, AT_NCCL_PROTO_SIMPLE));
  CHECK(lib.outcome() == 1);
  // Sizes and collectives the table has no row for are forced too.
  CHECK(Ask(comm, AT_NCCL_FUNC_ALL_GATHER, size_t{1} << 40) ==
        Steers(AT_NCCL_ALGO_TREE, AT_NCCL_PROTO_SIMPLE));
  CHECK(lib.outcome() == 1);

  SECTION("channels") {
    lib.force(AT_NCCL_ALGO_PAT, AT_NCCL_PROTO_LL, 7);
    CHECK(Ask(comm, AT_NCCL_FUNC_REDUCE, 50) == Steers(AT_NCCL_ALGO_PAT, AT_NCCL_PROTO_LL, 7));
    CHECK(lib.outcome() == 1);
    lib.force(AT_NCCL_ALGO_PAT, AT_NCCL_PROTO_LL, 65);  // out of range: NCCL's
    CHECK(Ask(comm, AT_NCCL_FUNC_REDUCE, 50) == Steers(AT_NCCL_ALGO_PAT, AT_NCCL_PROTO_LL));
  }
  SECTION("an entry NCCL does not offer: table untouched, outcome -1") {
    lib.force(AT_NCCL_ALGO_NVLS, AT_NCCL_PROTO_SIMPLE, 8);
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == kNothing);
    CHECK(lib.outcome() == -1);
    lib.force(AT_NCCL_ALGO_TREE, AT_NCCL_PROTO_LL128, 0);
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == kNothing);
    CHECK(lib.outcome() == -1);
    lib.force(AT_NCCL_ALGO_COUNT, AT_NCCL_PROTO_LL, 0);  // beyond the call's table
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == kNothing);
    CHECK(lib.outcome() == -1);
    lib.force(AT_NCCL_ALGO_RING, AT_NCCL_PROTO_COUNT, 0);
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == kNothing);
    CHECK(lib.outcome() == -1);
    // A later call that applies it says so.
    lib.force(AT_NCCL_ALGO_RING, AT_NCCL_PROTO_SIMPLE, 0);
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == Steers(AT_NCCL_ALGO_RING, AT_NCCL_PROTO_SIMPLE));
    CHECK(lib.outcome() == 1);
  }
  SECTION("another thread sees no force") {
    Choice seen;
    int outcome_there = 99;
    std::thread other([&] {
      seen = Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0);
      outcome_there = lib.outcome();
      lib.force(AT_NCCL_ALGO_PAT, AT_NCCL_PROTO_SIMPLE, 0);  // its own, gone with it
    });
    other.join();
    CHECK(seen == table_choice);
    CHECK(outcome_there == 0);
    CHECK(lib.outcome() == 1);  // this thread's is unchanged
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == Steers(AT_NCCL_ALGO_TREE, AT_NCCL_PROTO_SIMPLE));
  }
  SECTION("a force without a table, and on a context NCCL never set") {
    Comm none(Version::kV5, TempPath("no_table_force"), 2, 1);
    CHECK(Ask(none, AT_NCCL_FUNC_BROADCAST, 3) == Steers(AT_NCCL_ALGO_TREE, AT_NCCL_PROTO_SIMPLE));
    float cost[kAlgos][kProtos];
    FillCosts(cost);
    int channels = 0;
    lib.force(AT_NCCL_ALGO_RING, AT_NCCL_PROTO_LL128, 5);
    CHECK(lib.v5->getCollInfo(nullptr, AT_NCCL_FUNC_ALL_REDUCE, 1, 1,
                              reinterpret_cast<float**>(cost), kAlgos, kProtos, 0,
                              &channels) == AT_NCCL_SUCCESS);
    CHECK(cost[AT_NCCL_ALGO_RING][AT_NCCL_PROTO_LL128] == 0.0f);
    CHECK(channels == 5);
  }

  for (int clear : {-1, 0}) {
    // algo -1 or proto -1 clears the force; the table steers again.
    lib.force(clear == -1 ? -1 : AT_NCCL_ALGO_TREE, -1, 0);
    CHECK(lib.outcome() == 0);
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == table_choice);
    CHECK(lib.outcome() == 0);
  }

  // A channel limit alone: no entry of the table changed, the limit set.
  lib.force(-1, -1, 6);
  float cost[kAlgos][kProtos];
  FillCosts(cost);
  float before[kAlgos][kProtos];
  FillCosts(before);
  int channels = 0;
  CHECK(lib.v5->getCollInfo(nullptr, AT_NCCL_FUNC_ALL_REDUCE, 1, 1,
                            reinterpret_cast<float**>(cost), kAlgos, kProtos, 0,
                            &channels) == AT_NCCL_SUCCESS);
  CHECK(lib.outcome() == 1);
  CHECK(channels == 6);
  CHECK(std::memcmp(cost, before, sizeof(cost)) == 0);
  lib.force(-1, -1, 0);
  CHECK(lib.outcome() == 0);
}

TEST_CASE("algorithm and protocol names in NCCL's numbering") {
  const Library& lib = Lib();
  const char* algos[] = {"tree",      "ring", "collnet_direct", "collnet_chain", "nvls",
                         "nvls_tree", "pat"};
  const char* protos[] = {"ll", "ll128", "simple"};
  for (int a = 0; a < AT_NCCL_ALGO_COUNT; ++a) CHECK(std::string(lib.algo_name(a)) == algos[a]);
  for (int p = 0; p < AT_NCCL_PROTO_COUNT; ++p) CHECK(std::string(lib.proto_name(p)) == protos[p]);
  CHECK(lib.algo_name(-1) == nullptr);
  CHECK(lib.algo_name(AT_NCCL_ALGO_COUNT) == nullptr);
  CHECK(lib.proto_name(-1) == nullptr);
  CHECK(lib.proto_name(AT_NCCL_PROTO_COUNT) == nullptr);
  CHECK(std::string(lib.v5->name) == "autotuned");
  CHECK(std::string(lib.v4->name) == "autotuned");
  CHECK(std::string(lib.v3->name) == "autotuned");
}

namespace {

// collnet offered, nvls not: a node with SHARP and NVLink multicast off.
void FillCollnet(float (*cost)[kProtos]) {
  FillAllOffered(cost);
  for (int p = 0; p < kProtos; ++p) cost[AT_NCCL_ALGO_NVLS][p] = -1.0f;
}

// The same, collnet_direct/simple the least cost: NCCL's own pick.
void FillCollnetCheapest(float (*cost)[kProtos]) {
  FillCollnet(cost);
  cost[AT_NCCL_ALGO_COLLNET_DIRECT][AT_NCCL_PROTO_SIMPLE] = 1.0f;
}

// nvls offered, collnet not: NVLink multicast without SHARP.
void FillNvls(float (*cost)[kProtos]) {
  FillAllOffered(cost);
  for (int a : {AT_NCCL_ALGO_COLLNET_DIRECT, AT_NCCL_ALGO_COLLNET_CHAIN}) {
    for (int p = 0; p < kProtos; ++p) cost[a][p] = -1.0f;
  }
}

}  // namespace

// NCCL bounds the channel count a tuner gives by the communicator's own
// channels, except for collnet_direct, collnet_chain and nvls over several
// nodes (its collnet path, scheduleCollTasksToPlan in enqueue.cc), where it
// runs that many channels as is: past the channels set up, or past
// MAXCHANNELS (32 before NCCL 2.25), that is memory outside NCCL's arrays.
TEST_CASE("a channel count never reaches NCCL where NCCL takes it unchecked") {
  const Library& lib = Lib();
  lib.force(-1, -1, 0);
  const int collnet_direct = AT_NCCL_ALGO_COLLNET_DIRECT, nvls = AT_NCCL_ALGO_NVLS;
  const int simple = AT_NCCL_PROTO_SIMPLE;
  std::string path = WriteTable("table_unchecked",
                                std::string(kHeader) +
                                    "all_reduce 2 1 0 100 nvls simple 16\n"
                                    "all_reduce 2 1 101 200 default default 8\n"
                                    "all_reduce 2 2 0 100 collnet_direct simple 0\n"
                                    "all_reduce 2 2 101 200 default default 8\n"
                                    "all_reduce 2 2 201 300 nvls_tree ll 4\n");
  SECTION("table rows") {
    {
      Comm one(Version::kV5, path, 2, 1);
      REQUIRE(one.init_logs.size() == 1);
      INFO(one.init_logs[0].text);
      CHECK(one.init_logs[0].level == AT_NCCL_LOG_INFO);
      // One node: NCCL bounds nvls's channels by its own.
      CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 50, FillAllOffered) == Steers(nvls, simple, 16));
      CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 150, FillNvls) == Steers(-1, -1, 8));
      CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 150, FillCosts) == Steers(-1, -1, 8));
      CHECK(TakeLogs().empty());
      // On one node, collnet offered but not NCCL's pick (tree/ll costs
      // least): the channels are given.
      CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 150, FillCollnet) == Steers(-1, -1, 8));
      CHECK(TakeLogs().empty());
      // NCCL's own pick is collnet: the row's channels are not given, and
      // that is logged once for the communicator.
      CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 150, FillCollnetCheapest) == kNothing);
      CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 101, FillCollnetCheapest) == kNothing);
      std::vector<LogLine> logs = TakeLogs();
      REQUIRE(logs.size() == 1);
      INFO(logs[0].text);
      CHECK(logs[0].level == AT_NCCL_LOG_INFO);
      CHECK(Contains(logs[0].text, "line 4 (default/default, 8 channels)"));
      CHECK(Contains(logs[0].text, "collnet_direct"));
      CHECK(Contains(logs[0].text, "unchecked"));
    }
    {
      Comm two(Version::kV4, path, 2, 2);
      CHECK(Ask(two, AT_NCCL_FUNC_ALL_REDUCE, 50, FillAllOffered) ==
            Steers(collnet_direct, simple, 0));
      CHECK(Ask(two, AT_NCCL_FUNC_ALL_REDUCE, 150, FillCosts) == Steers(-1, -1, 8));
      // Over two nodes nvls is NCCL's collnet path too, and any offer of one
      // of them keeps the channels NCCL's, whatever the costs say.
      CHECK(Ask(two, AT_NCCL_FUNC_ALL_REDUCE, 150, FillNvls) == kNothing);
      CHECK(Ask(two, AT_NCCL_FUNC_ALL_REDUCE, 150, FillCollnet) == kNothing);
      // nvls_tree is bounded wherever it runs.
      CHECK(Ask(two, AT_NCCL_FUNC_ALL_REDUCE, 250, FillAllOffered) ==
            Steers(AT_NCCL_ALGO_NVLS_TREE, AT_NCCL_PROTO_LL, 4));
    }
  }
  SECTION("forces") {
    Comm one(Version::kV5, path, 2, 1);
    Comm two(Version::kV5, path, 2, 2);
    lib.force(collnet_direct, simple, 8);
    CHECK(Ask(two, AT_NCCL_FUNC_ALL_REDUCE, 1, FillAllOffered) == kNothing);
    CHECK(lib.outcome() == -1);
    lib.force(collnet_direct, simple, 0);
    CHECK(Ask(two, AT_NCCL_FUNC_ALL_REDUCE, 1, FillAllOffered) ==
          Steers(collnet_direct, simple, 0));
    CHECK(lib.outcome() == 1);
    lib.force(nvls, simple, 8);
    CHECK(Ask(two, AT_NCCL_FUNC_ALL_REDUCE, 1, FillNvls) == kNothing);
    CHECK(lib.outcome() == -1);
    CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 1, FillNvls) == Steers(nvls, simple, 8));
    CHECK(lib.outcome() == 1);
    // A channel limit alone: not given where NCCL may run collnet.
    lib.force(-1, -1, 6);
    CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 1, FillCollnetCheapest) == kNothing);
    CHECK(lib.outcome() == -1);
    CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 1, FillCollnet) == Steers(-1, -1, 6));
    CHECK(lib.outcome() == 1);
    CHECK(Ask(one, AT_NCCL_FUNC_ALL_REDUCE, 1, FillNvls) == Steers(-1, -1, 6));
    CHECK(lib.outcome() == 1);
    CHECK(Ask(two, AT_NCCL_FUNC_ALL_REDUCE, 1, FillNvls) == kNothing);
    CHECK(lib.outcome() == -1);
    // Without a context the nodes are unknown: nvls counts as over several.
    float cost[kAlgos][kProtos];
    FillNvls(cost);
    int channels = 0;
    CHECK(lib.v5->getCollInfo(nullptr, AT_NCCL_FUNC_ALL_REDUCE, 1, 1,
                              reinterpret_cast<float**>(cost), kAlgos, kProtos, 0,
                              &channels) == AT_NCCL_SUCCESS);
    CHECK(channels == 0);
    CHECK(lib.outcome() == -1);
    lib.force(-1, -1, 0);
    CHECK(TakeLogs().empty());  // forces log nothing
  }
}

namespace {

bool AllPrintable(const std::string& s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

bool EndsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

}  // namespace

TEST_CASE("a path from the environment reaches NCCL's logger escaped and bounded") {
  const std::string dir = TempPath("");
  SECTION("control bytes: no forged line, no hidden text") {
    std::string path = dir + "evil\nNCCL WARN forged\x1b[2K";
    std::remove(path.c_str());
    Comm comm(Version::kV5, path, 2, 1);
    REQUIRE(comm.init_logs.size() == 1);
    const std::string& text = comm.init_logs[0].text;
    INFO(text);
    CHECK(AllPrintable(text));
    CHECK(Contains(text, "evil\\x0aNCCL WARN forged\\x1b[2K (No such file or directory)"));
    CHECK(EndsWith(text, ": NCCL's own choices"));
  }
  SECTION("a table loaded from such a path") {
    std::string path = WriteTable("tab\tle\x01", kTable);
    Comm comm(Version::kV5, path, 2, 1);
    REQUIRE(comm.init_logs.size() == 1);
    const std::string& text = comm.init_logs[0].text;
    INFO(text);
    CHECK(comm.init_logs[0].level == AT_NCCL_LOG_INFO);
    CHECK(AllPrintable(text));
    CHECK(Contains(text, "tab\\x09le\\x01 (identity ab12cd34)"));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == Steers(AT_NCCL_ALGO_RING, AT_NCCL_PROTO_LL));
  }
  SECTION("a path of 3000 bytes: its start, its size and the reason") {
    std::string path = dir + std::string(3000, 'x');
    Comm comm(Version::kV5, path, 2, 1);
    REQUIRE(comm.init_logs.size() == 1);
    const std::string& text = comm.init_logs[0].text;
    INFO(text);
    CHECK(comm.init_logs[0].level == AT_NCCL_LOG_WARN);
    CHECK(AllPrintable(text));
    CHECK(text.size() < 512);
    CHECK(Contains(text, dir + "xxx"));
    CHECK(Contains(text, "...(" + std::to_string(path.size()) + " bytes)"));
    CHECK(Contains(text, "File name too long"));
    CHECK(EndsWith(text, ": NCCL's own choices"));
  }
  SECTION("a path of control bytes only is bounded after escaping too") {
    std::string path = dir + std::string(200, '\n');
    Comm comm(Version::kV5, path, 2, 1);
    REQUIRE(comm.init_logs.size() == 1);
    const std::string& text = comm.init_logs[0].text;
    INFO(text);
    CHECK(AllPrintable(text));
    CHECK(text.size() < 512);
    CHECK(Contains(text, "\\x0a\\x0a"));
    CHECK(EndsWith(text, ": NCCL's own choices"));
  }
}

TEST_CASE("a FIFO, a device or a symlink loop is rejected at once, never waited on") {
  std::string fifo = TempPath("table_fifo");
  std::remove(fifo.c_str());
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  std::string loop_a = TempPath("loop_a"), loop_b = TempPath("loop_b");
  std::remove(loop_a.c_str());
  std::remove(loop_b.c_str());
  REQUIRE(symlink(loop_b.c_str(), loop_a.c_str()) == 0);
  REQUIRE(symlink(loop_a.c_str(), loop_b.c_str()) == 0);
  const struct {
    std::string path;
    const char* reason;
  } cases[] = {{fifo, "not a regular file"},
               {"/dev/zero", "not a regular file"},
               {loop_a, "Too many levels of symbolic links"}};
  for (const auto& c : cases) {
    INFO(c.path);
    Comm comm(Version::kV5, c.path, 2, 1);
    REQUIRE(comm.init_logs.size() == 1);
    INFO(comm.init_logs[0].text);
    CHECK(comm.init_logs[0].level == AT_NCCL_LOG_WARN);
    CHECK(Contains(comm.init_logs[0].text, c.reason));
    CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, 0) == kNothing);
  }
}

namespace {

std::atomic<int> bad_log_lines{0};

extern "C" void CheckLog(at_nccl_log_level_t /*level*/, unsigned long /*flags*/,
                         const char* /*file*/, int /*line*/, const char* fmt, ...) {
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (!AllPrintable(buf)) bad_log_lines.fetch_add(1);
}

}  // namespace

// Communicators made, asked and destroyed on many threads at once, some
// threads forcing, while the table is replaced (written aside and renamed, as
// tune-nccl does): each communicator steers by the old table or by the new
// one, every call the same way, and forces stay on their threads.
TEST_CASE("many communicators on many threads at once, the table replaced meanwhile") {
  const Library& lib = Lib();
  const std::string path = TempPath("table_threads");
  const std::string a = std::string(kHeader) + "all_reduce 2 1 0 1023 ring ll 4\n";
  const std::string b = std::string(kHeader) + "all_reduce 2 1 0 1023 tree simple 2\n";
  WriteTable("table_threads", a);
  REQUIRE(setenv("AUTOTUNED_NCCL_TABLE", path.c_str(), 1) == 0);  // before any thread
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, made{0};
  std::thread writer([&] {
    for (int i = 0; !stop.load(); ++i) {
      const std::string tmp = path + ".tmp";
      std::ofstream(tmp, std::ios::binary | std::ios::trunc) << (i % 2 ? a : b);
      if (std::rename(tmp.c_str(), path.c_str()) != 0) wrong.fetch_add(1);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const bool forcing = t % 2 == 1;
      if (forcing) lib.force(AT_NCCL_ALGO_PAT, AT_NCCL_PROTO_SIMPLE, 3);
      for (int i = 0; i < 300; ++i) {
        void* ctx = nullptr;
        if (t % 3 == 0) {
          lib.v4->init(2, 1, CheckLog, &ctx);
        } else {
          lib.v5->init(&ctx, static_cast<uint64_t>(t), 2, 1, CheckLog, nullptr, nullptr);
        }
        if (ctx == nullptr) {
          wrong.fetch_add(1);
          continue;
        }
        made.fetch_add(1);
        int first_algo = -2;
        for (int k = 0; k < 20; ++k) {
          float cost[kAlgos][kProtos];
          FillCosts(cost);
          int channels = 0;
          lib.v5->getCollInfo(ctx, AT_NCCL_FUNC_ALL_REDUCE, static_cast<size_t>(k * 50), 1,
                              reinterpret_cast<float**>(cost), kAlgos, kProtos, 0, &channels);
          int algo = -1, proto = -1;
          for (int x = 0; x < kAlgos; ++x) {
            for (int y = 0; y < kProtos; ++y) {
              if (cost[x][y] == 0.0f) {
                algo = x;
                proto = y;
              }
            }
          }
          bool ok;
          if (forcing) {
            ok = algo == AT_NCCL_ALGO_PAT && proto == AT_NCCL_PROTO_SIMPLE && channels == 3 &&
                 lib.outcome() == 1;
          } else {
            ok = (algo == AT_NCCL_ALGO_RING && proto == AT_NCCL_PROTO_LL && channels == 4) ||
                 (algo == AT_NCCL_ALGO_TREE && proto == AT_NCCL_PROTO_SIMPLE && channels == 2);
            if (first_algo == -2) first_algo = algo;
            ok = ok && algo == first_algo && lib.outcome() == 0;
          }
          if (!ok) wrong.fetch_add(1);
        }
        lib.v5->finalize(ctx);
      }
      if (forcing) lib.force(-1, -1, 0);
    });
  }
  for (std::thread& t : threads) t.join();
  stop = true;
  writer.join();
  CHECK(made.load() == 8 * 300);
  CHECK(wrong.load() == 0);
  CHECK(bad_log_lines.load() == 0);
}

// What NCCL never does, but a careless caller might: every call still
// succeeds, writes nothing outside what it was given, and steers nothing.
TEST_CASE("calls out of the ABI's bounds: success, nothing steered, nothing written outside") {
  const Library& lib = Lib();
  lib.force(-1, -1, 0);
  std::string path = WriteTable("table_misuse", kTable);
  CHECK(lib.v5->finalize(nullptr) == AT_NCCL_SUCCESS);  // destroy without init
  CHECK(lib.v4->destroy(nullptr) == AT_NCCL_SUCCESS);
  REQUIRE(setenv("AUTOTUNED_NCCL_TABLE", path.c_str(), 1) == 0);
  CHECK(lib.v5->init(nullptr, 1, 2, 1, CaptureLog, nullptr, nullptr) == AT_NCCL_SUCCESS);
  CHECK(lib.v4->init(2, 1, CaptureLog, nullptr) == AT_NCCL_SUCCESS);
  CHECK(lib.v3->init(0, 0, CaptureLog, nullptr) == AT_NCCL_SUCCESS);
  TakeLogs();

  Comm comm(Version::kV5, path, 2, 1);
  Comm again(Version::kV5, path, 2, 1);  // init twice for one "communicator"
  CHECK(again.ctx != comm.ctx);
  // Functions NCCL does not ask about (send/recv 5..8), or no function at all.
  for (int f : {-1, static_cast<int>(AT_NCCL_FUNC_COUNT), 8, 1 << 30}) {
    CHECK(Ask(comm, static_cast<at_nccl_func_t>(f), 0) == kNothing);
  }
  // No cost table, no channel count: nothing to write.
  CHECK(lib.v5->getCollInfo(comm.ctx, AT_NCCL_FUNC_ALL_REDUCE, 0, 1, nullptr, kAlgos, kProtos, 0,
                            nullptr) == AT_NCCL_SUCCESS);
  CHECK(lib.v5->getCollInfo(comm.ctx, AT_NCCL_FUNC_REDUCE, 50, 1, nullptr, kAlgos, kProtos, 0,
                            nullptr) == AT_NCCL_SUCCESS);
  // Tables smaller than the row's entry, down to none: the entry is out of
  // the call's table, nothing is read or written past what was passed.
  for (int algos : {0, -1, static_cast<int>(AT_NCCL_ALGO_RING)}) {
    for (int protos : {0, -3, static_cast<int>(AT_NCCL_PROTO_LL)}) {
      std::vector<float> cost(static_cast<size_t>(std::max(algos, 0) * std::max(protos, 0)) + 1,
                              5.0f);
      const std::vector<float> before = cost;
      int channels = 0;
      CHECK(lib.v5->getCollInfo(comm.ctx, AT_NCCL_FUNC_ALL_REDUCE, 0, 1,
                                reinterpret_cast<float**>(cost.data()), algos, protos, 0,
                                &channels) == AT_NCCL_SUCCESS);
      CHECK(cost == before);
      CHECK(channels == 0);
    }
  }
  // NaN and infinite costs: a NaN entry is not offered, an infinite one is.
  float cost[kAlgos][kProtos];
  FillCosts(cost);
  cost[AT_NCCL_ALGO_RING][AT_NCCL_PROTO_LL] = std::numeric_limits<float>::quiet_NaN();
  int channels = 0;
  CHECK(comm.GetCollInfo(AT_NCCL_FUNC_ALL_REDUCE, 0, cost, &channels) == AT_NCCL_SUCCESS);
  CHECK(std::isnan(cost[AT_NCCL_ALGO_RING][AT_NCCL_PROTO_LL]));
  FillCosts(cost);
  cost[AT_NCCL_ALGO_RING][AT_NCCL_PROTO_LL] = std::numeric_limits<float>::infinity();
  CHECK(comm.GetCollInfo(AT_NCCL_FUNC_ALL_REDUCE, 0, cost, &channels) == AT_NCCL_SUCCESS);
  CHECK(cost[AT_NCCL_ALGO_RING][AT_NCCL_PROTO_LL] == 0.0f);
  // Sizes at the ends of size_t.
  CHECK(Ask(comm, AT_NCCL_FUNC_ALL_REDUCE, std::numeric_limits<size_t>::max()) == kNothing);
  TakeLogs();
}
