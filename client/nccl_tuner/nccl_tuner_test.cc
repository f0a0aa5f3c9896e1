// libautotuned_nccl_tuner.so driven as NCCL drives it: dlopen, dlsym of the
// plugin structs, init, getCollInfo with a cost table laid out as NCCL lays
// it out (float[algo][proto] passed as float**), finalize.
#include <dlfcn.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <fstream>
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

Choice Ask(Comm& comm, at_nccl_func_t f, size_t bytes) {
  float cost[kAlgos][kProtos];
  float before[kAlgos][kProtos];
  FillCosts(cost);
  FillCosts(before);
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
  SECTION("a line of 512 bytes, a file of 1 MiB, the widest numbers, no final newline") {
    std::string text = kGood + "#" + std::string(511, 'x') + "\n";
    text += "all_gather 64 8 9223372036854775806 9223372036854775807 nvls_tree ll128 64";
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
