#include "client/cli/nccl_table.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/enums.h"
#include "common/digest.h"

extern "C" {
#include "client/nccl_tuner/nccl_tuner_table.h"
}

namespace autotuned {
namespace cli {
namespace {

// The catalogue's numbering of NCCL's algorithms and protocols: NCCL's plus
// one, 0 = NCCL's choice (daemon/measure/backend/cuda/cuda_catalogue.h).
constexpr int64_t kTree = 1, kRing = 2;
constexpr int64_t kProtocols[] = {1, 2, 3};  // ll, ll128, simple
constexpr int kMaxChannels = 64;
// The table file's first line (client/nccl_tuner/nccl_tuner.h).
constexpr char kMagic[] = "autotuned-nccl-table 1";

int64_t Param(const v1::Candidate& c, const char* name) {
  auto it = c.params().find(name);
  return it == c.params().end() ? 0 : it->second;
}

// NCCL's nBytes for `count` elements per rank (the larger of a rank's send
// and receive buffers).
uint64_t NcclBytes(v1::Collective c, int64_t count, v1::DType dtype, int world) {
  uint64_t bytes = static_cast<uint64_t>(count) * static_cast<uint64_t>(DTypeSize(dtype));
  if (c == v1::ALL_GATHER || c == v1::REDUCE_SCATTER) bytes *= static_cast<uint64_t>(world);
  return bytes;
}

absl::StatusOr<std::string> Row(const NcclSweep& s, const v1::SizeRange& r, int world,
                                uint64_t lo, uint64_t hi) {
  const int index = r.winner_index();
  if (index < 0 || index >= static_cast<int>(s.candidates.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        CollectiveName(s.collective), ": winner_index ", index, " is not a candidate"));
  }
  const v1::Candidate& w = s.candidates[index];
  const int64_t algo = Param(w, "algo"), proto = Param(w, "proto"),
                channels = Param(w, "channels");
  const char* algo_name = algo == 0 ? "default" : at_table_algo_name(static_cast<int>(algo - 1));
  const char* proto_name =
      proto == 0 ? "default" : at_table_proto_name(static_cast<int>(proto - 1));
  if (algo_name == nullptr || proto_name == nullptr || (algo == 0) != (proto == 0) ||
      channels < 0 || channels > kMaxChannels) {
    return absl::InvalidArgumentError(absl::StrCat(
        CollectiveName(s.collective), ": winner \"", r.winner(),
        "\" is not an NCCL choice the tuner plugin can apply"));
  }
  return absl::StrCat(CollectiveName(s.collective), " ", world, " 1 ", lo, " ", hi, " ",
                      algo_name, " ", proto_name, " ", channels, "\n");
}

}  // namespace

const std::vector<v1::Collective>& NcclTableCollectives() {
  static const auto* all = new std::vector<v1::Collective>{
      v1::ALL_REDUCE, v1::ALL_GATHER, v1::REDUCE_SCATTER, v1::BROADCAST};
  return *all;
}

std::vector<v1::Candidate> NcclCandidates(v1::Collective collective,
                                          const std::vector<int>& channels) {
  const std::string impl = absl::StrCat(CollectiveName(collective), "/nccl");
  std::vector<v1::Candidate> out;
  std::vector<int> counts = {0};
  counts.insert(counts.end(), channels.begin(), channels.end());
  std::vector<int64_t> algos = {kRing};
  if (collective == v1::ALL_REDUCE) algos = {kTree, kRing};
  for (int ch : counts) {
    v1::Candidate own;
    own.set_impl(impl);
    if (ch > 0) (*own.mutable_params())["channels"] = ch;
    out.push_back(own);
    for (int64_t algo : algos) {
      for (int64_t proto : kProtocols) {
        v1::Candidate c;
        c.set_impl(impl);
        (*c.mutable_params())["algo"] = algo;
        (*c.mutable_params())["proto"] = proto;
        if (ch > 0) (*c.mutable_params())["channels"] = ch;
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

absl::StatusOr<NcclTablePlan> ParseTuneNcclFlags(const RawFlags& flags,
                                                 const std::string& default_dtype) {
  NcclTablePlan plan;
  plan.flags = flags;
  plan.out = flags.out.empty() ? "/var/lib/autotuned/nccl_tuner.table" : flags.out;
  std::vector<int> channels;
  if (!flags.channels.empty()) {
    for (absl::string_view piece : absl::StrSplit(flags.channels, ',')) {
      int ch = 0;
      if (!absl::SimpleAtoi(piece, &ch) || ch < 1 || ch > kMaxChannels) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--channels: \"", piece, "\" is not a channel count (1..", kMaxChannels, ")"));
      }
      if (std::find(channels.begin(), channels.end(), ch) != channels.end()) {
        return absl::InvalidArgumentError(absl::StrCat("--channels: ", ch, " given twice"));
      }
      channels.push_back(ch);
    }
  }
  std::vector<v1::Collective> collectives = NcclTableCollectives();
  if (flags.given.count("collectives") != 0 && flags.collectives.empty()) {
    return absl::InvalidArgumentError("--collectives: empty (leave it out for all four)");
  }
  if (!flags.collectives.empty()) {
    collectives.clear();
    for (absl::string_view piece : absl::StrSplit(flags.collectives, ',')) {
      absl::StatusOr<v1::Collective> c = ParseCollective(std::string(piece));
      if (!c.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("--collectives: ", c.status().message()));
      }
      if (c.value() == v1::ALL_TO_ALL) {
        return absl::InvalidArgumentError(
            "--collectives: all_to_all is NCCL's send/receive: no algorithm to choose");
      }
      if (std::find(collectives.begin(), collectives.end(), *c) != collectives.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--collectives: ", CollectiveName(*c), " given twice"));
      }
      collectives.push_back(*c);
    }
  }
  RawFlags f = flags;
  if (f.given.count("dtype") == 0) f.dtype = default_dtype;
  if (f.given.count("to") == 0) f.to = "256MiB";
  if (f.given.count("factor") == 0) f.factor = 4;
  for (v1::Collective c : collectives) {
    f.collective = CollectiveName(c);
    f.candidates.clear();
    absl::StatusOr<Plan> sweep = ParseSweepFlags(f);
    if (!sweep.ok()) return sweep.status();
    for (v1::Candidate& candidate : NcclCandidates(c, channels)) {
      *sweep->problem.add_candidates() = std::move(candidate);
    }
    plan.sweeps.push_back(*std::move(sweep));
  }
  return plan;
}

absl::StatusOr<std::string> NcclTableText(int world, const std::vector<NcclSweep>& sweeps,
                                          const std::string& fingerprint,
                                          const std::string& existing) {
  std::string shown = fingerprint.substr(0, 64);  // a comment line: one line, plain
  for (char& c : shown) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c))) c = '?';
  }
  std::string rows;
  for (const NcclSweep& s : sweeps) {
    const auto& ranges = s.table.ranges();
    // The gap between range i and the next splits at its geometric middle:
    // range i ends there, the next starts a byte later.
    auto split = [&](int i) {
      const double a =
          static_cast<double>(NcclBytes(s.collective, ranges[i].max_count(), s.dtype, world));
      const double b = static_cast<double>(
          NcclBytes(s.collective, ranges[i + 1].min_count(), s.dtype, world));
      return static_cast<uint64_t>(std::sqrt(a * b));
    };
    for (int i = 0; i < ranges.size(); ++i) {
      const uint64_t lo = i > 0 ? split(i - 1) + 1 : 0;
      const uint64_t hi =
          i + 1 < ranges.size() ? split(i) : std::numeric_limits<int64_t>::max();
      absl::StatusOr<std::string> row = Row(s, ranges[i], world, lo, hi);
      if (!row.ok()) return row.status();
      rows += *row;
    }
  }
  // The existing file's rows of other world sizes (8 fields, a collective
  // first), when it is a table.
  if (absl::StartsWith(existing, absl::StrCat(kMagic, "\n"))) {
    const std::string mine = absl::StrCat(world);
    for (absl::string_view line : absl::StrSplit(existing, '\n')) {
      const std::vector<absl::string_view> f = absl::StrSplit(line, ' ');
      if (f.size() != 8 || f[1] == mine) continue;
      bool collective = false;
      for (v1::Collective c : NcclTableCollectives()) collective |= f[0] == CollectiveName(c);
      if (collective) absl::StrAppend(&rows, line, "\n");
    }
  }
  return absl::StrCat(kMagic, "\nidentity ",
                      Hex64(Fnv1a64(absl::StrCat(fingerprint, "\n", rows))),
                      "\n# autotunectl tune-nccl; node fingerprint ", shown,
                      "\n# collective nranks nnodes min_bytes max_bytes algo proto channels\n",
                      rows);
}

}  // namespace cli
}  // namespace autotuned
