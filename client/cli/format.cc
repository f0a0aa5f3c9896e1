#include "client/cli/format.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>

#include <google/protobuf/util/json_util.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "client/cli/candidate.h"
#include "client/cli/enums.h"
#include "client/cli/size.h"
#include "client/cli/table.h"

namespace autotuned {
namespace cli {
namespace {

using Align = TextTable::Align;

constexpr int kMaxSplitsShown = 8;

std::string Us(double us) {
  if (!std::isfinite(us)) return "-";
  return absl::StrFormat("%.1f", us);
}

std::string Gbps(double gbps) {
  if (!std::isfinite(gbps) || gbps <= 0) return "-";
  return absl::StrFormat(gbps < 1 ? "%.2f" : "%.1f", gbps);
}

// As nccl-tests prints bandwidths: GB/s with two decimals.
std::string BandwidthCell(double gbps) {
  if (!std::isfinite(gbps) || gbps <= 0) return "-";
  return absl::StrFormat("%.2f", gbps);
}

std::string Percent(double fraction) {
  if (!std::isfinite(fraction)) return "-";
  return absl::StrFormat("%.1f%%", fraction * 100);
}

// A candidate against the winner, paired by pass: "+5.2% (+3.1%..+7.0%)"
// (its time over the winner's, minus 1, and the 99 % interval); "-" where no
// passes paired (the winner itself, and short or older measurements).
std::string VsWinner(const v1::CandidateResult& c) {
  if (c.paired() <= 0) return "-";
  auto signed_percent = [](double ratio) {
    return absl::StrFormat("%+.1f%%", (ratio - 1.0) * 100);
  };
  return absl::StrCat(signed_percent(c.vs_winner()), " (", signed_percent(c.vs_winner_low()),
                      "..", signed_percent(c.vs_winner_high()), ")");
}

std::string UnixMillis(int64_t ms) {
  if (ms <= 0) return "-";
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixMillis(ms),
                          absl::UTCTimeZone());
}

// Bytes of one rank's `count` elements, or -1 when the dtype is unknown.
int64_t CountBytes(const v1::Problem& problem) {
  const int64_t size = DTypeSize(problem.dtype());
  return size == 0 ? -1 : problem.count() * size;
}


// A sweep size left out (ProblemResult.skipped) is SKIPPED, beside the
// wire's statuses.
std::string Status(const v1::ProblemResult& result) {
  if (result.skipped()) return "SKIPPED";
  return DecisionStatusName(result.status());
}

// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line
// break, quotes doubled.
std::string CsvField(const std::string& field) {
  if (field.find_first_of(",\"\r\n") == std::string::npos) return field;
  std::string quoted = "\"";
  for (char c : field) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

// A plain number with 3 decimals, "" where there is none (+inf, NaN).
std::string CsvNumber(double value) {
  if (!std::isfinite(value)) return "";
  return absl::StrFormat("%.3f", value);
}

// The bytes of the sweep axis: the problem's count in bytes of its dtype, or
// the result's own bytes when the dtype is unset.
int64_t AxisBytes(const v1::ProblemResult& result) {
  const int64_t bytes = CountBytes(result.problem());
  return bytes >= 0 ? bytes : result.bytes();
}

// "name" -> "ring" when every name starts with the same "<collective>/".
std::vector<std::string> ShortNames(const std::vector<std::string>& names) {
  if (names.empty()) return names;
  const size_t slash = names[0].find('/');
  if (slash == std::string::npos) return names;
  const std::string prefix = names[0].substr(0, slash + 1);
  for (const std::string& name : names) {
    if (!absl::StartsWith(name, prefix) || name.size() == prefix.size()) {
      return names;
    }
  }
  std::vector<std::string> out;
  for (const std::string& name : names) out.push_back(name.substr(prefix.size()));
  return out;
}

std::string JoinEnums(const google::protobuf::RepeatedField<int>& values,
                      std::string (*name)(int)) {
  if (values.empty()) return "any";
  std::vector<std::string> names;
  for (int v : values) names.push_back(name(v));
  return absl::StrJoin(names, ",");
}

std::string DTypeNameInt(int v) { return DTypeName(static_cast<v1::DType>(v)); }
std::string OpNameInt(int v) { return ReduceOpName(static_cast<v1::ReduceOp>(v)); }

std::string WorldSizes(const v1::Implementation& impl) {
  const int lo = impl.min_world_size();
  const int hi = impl.max_world_size();
  const bool unbounded = hi <= 0 || hi >= (1 << 20);
  if (unbounded) return lo <= 1 ? "any" : absl::StrCat(lo, "+");
  if (lo == hi) return absl::StrCat(lo);
  return absl::StrCat(lo, "-", hi);
}

std::string Duration(int64_t seconds) {
  return seconds == 0 ? "0s" : absl::FormatDuration(absl::Seconds(seconds));
}

// "[label] all_reduce float32 sum", "broadcast bfloat16 from rank 3".
std::string ProblemKind(const v1::Problem& problem) {
  std::string out;
  if (!problem.label().empty()) absl::StrAppend(&out, "[", problem.label(), "] ");
  absl::StrAppend(&out, CollectiveName(problem.collective()), " ",
                  DTypeName(problem.dtype()));
  if (IsReducing(problem.collective())) {
    absl::StrAppend(&out, " ",
                    ReduceOpName(problem.op() == v1::REDUCE_OP_UNSPECIFIED
                                     ? v1::SUM
                                     : problem.op()));
  }
  if (problem.collective() == v1::BROADCAST) {
    absl::StrAppend(&out, " from rank ", problem.root());
  }
  return out;
}

}  // namespace

std::string DescribeProblem(const v1::Problem& problem) {
  std::string out = ProblemKind(problem);
  if (problem.split_counts_size() > 0) {
    std::vector<int64_t> shown(
        problem.split_counts().begin(),
        problem.split_counts().begin() +
            std::min(problem.split_counts_size(), kMaxSplitsShown));
    absl::StrAppend(&out, ", splits ", absl::StrJoin(shown, ","),
                    problem.split_counts_size() > kMaxSplitsShown ? ",..." : "",
                    " elements (", problem.split_counts_size(), " counts)");
    return out;
  }
  const int64_t bytes = CountBytes(problem);
  if (bytes >= 0) {
    absl::StrAppend(&out, ", ", FormatBytes(bytes), " (", problem.count(),
                    " elements)");
  } else {
    absl::StrAppend(&out, ", ", problem.count(), " elements");
  }
  return out;
}

std::string WinnerLabel(const v1::ProblemResult& result) {
  if (result.winner().empty()) return "";
  if (result.ranked_size() > 0 && result.ranked(0).ok() &&
      result.ranked(0).candidate().impl() == result.winner()) {
    return FormatCandidate(result.ranked(0).candidate());
  }
  const int index = result.winner_index();
  const auto& candidates = result.problem().candidates();
  if (index >= 0 && index < candidates.size() &&
      candidates[index].impl() == result.winner()) {
    return FormatCandidate(candidates[index]);
  }
  return result.winner();
}

std::string FormatProblemResult(const v1::ProblemResult& result) {
  std::string header =
      absl::StrCat(DescribeProblem(result.problem()), ": ", Status(result));
  std::vector<std::string> notes;
  if (!result.reason().empty()) notes.push_back(result.reason());
  if (result.status() == v1::CACHED && result.measured_unix_ms() > 0) {
    notes.push_back(
        absl::StrCat("measured ", UnixMillis(result.measured_unix_ms())));
  }
  if (!notes.empty()) absl::StrAppend(&header, " (", absl::StrJoin(notes, "; "), ")");
  const std::string winner = WinnerLabel(result);
  if (!winner.empty()) {
    absl::StrAppend(&header, result.status() == v1::FALLBACK ? ", default "
                                                             : ", winner ",
                    winner);
  }
  std::string out = header + "\n";
  if (result.ranked_size() == 0) return out;

  TextTable table({{"rank", Align::kRight},
                   {"implementation"},
                   {"mean us", Align::kRight},
                   {"median us", Align::kRight},
                   {"min us", Align::kRight},
                   {"max us", Align::kRight},
                   {"spread", Align::kRight},
                   {"busbw GB/s", Align::kRight},
                   {"vs winner", Align::kRight},
                   {"status"}});
  int rank = 0;
  for (const v1::CandidateResult& c : result.ranked()) {
    const std::string label = FormatCandidate(c.candidate());
    if (!c.ok()) {
      table.AddRow({"-", label, "-", "-", "-", "-", "-", "-", "-",
                    absl::StrCat("ruled out: ",
                                 c.reason().empty() ? "no reason given"
                                                    : c.reason())});
      continue;
    }
    table.AddRow({absl::StrCat(++rank), label, Us(c.mean_us()),
                  Us(c.median_us()), Us(c.min_us()), Us(c.max_us()),
                  Percent(c.spread()), Gbps(c.busbw_gbps()), VsWinner(c), "ok"});
  }
  return out + table.Render("  ");
}

std::string FormatTuneResponse(const v1::TuneResponse& response) {
  std::string out;
  std::vector<std::string> about;
  if (!response.round_id().empty()) about.push_back("round " + response.round_id());
  if (!response.backend().empty()) about.push_back("backend " + response.backend());
  if (!about.empty()) out = absl::StrJoin(about, ", ") + "\n";
  for (const v1::ProblemResult& result : response.results()) {
    if (!out.empty()) out += "\n";
    out += FormatProblemResult(result);
  }
  return out;
}

std::string FormatSweepProgress(const v1::SweepUpdate& update) {
  if (!update.has_size_result()) return "";
  const v1::ProblemResult& result = update.size_result();
  std::string out = absl::StrCat("[", update.done(), "/", update.total(), "] ",
                                 FormatBytes(AxisBytes(result)),
                                 ": ");
  const std::string winner = WinnerLabel(result);
  if (winner.empty()) {
    absl::StrAppend(&out, Status(result));
    if (!result.reason().empty()) absl::StrAppend(&out, " (", result.reason(), ")");
    return out;
  }
  absl::StrAppend(&out, result.status() == v1::FALLBACK ? "default " : "winner ",
                  winner);
  if (result.ranked_size() > 0 && result.ranked(0).ok()) {
    absl::StrAppend(&out, " ", Us(result.ranked(0).median_us()), " us");
  }
  if (result.status() != v1::TUNED) {
    absl::StrAppend(&out, " (", Status(result));
    if (result.status() != v1::CACHED && !result.reason().empty()) {
      absl::StrAppend(&out, ": ", result.reason());
    }
    absl::StrAppend(&out, ")");
  }
  return out;
}

std::vector<std::string> SweepCandidateNames(const std::vector<v1::ProblemResult>& sizes) {
  if (sizes.empty()) return {};
  // Column i is the candidate at request index i.
  std::vector<std::string> names;
  for (const v1::Candidate& c : sizes[0].problem().candidates()) {
    names.push_back(FormatCandidate(c));
  }
  for (const v1::ProblemResult& result : sizes) {
    for (const v1::CandidateResult& c : result.ranked()) {
      if (c.index() < 0) continue;
      if (static_cast<size_t>(c.index()) >= names.size()) {
        names.resize(c.index() + 1);
      }
      if (names[c.index()].empty()) names[c.index()] = FormatCandidate(c.candidate());
    }
  }
  return ShortNames(names);
}

std::string FormatSweepTable(const std::vector<v1::ProblemResult>& sizes) {
  if (sizes.empty()) return "no sizes measured\n";
  const std::vector<std::string> titles = SweepCandidateNames(sizes);

  std::vector<TextTable::Column> columns = {{"size", Align::kRight}};
  for (const std::string& title : titles) columns.push_back({title + " ", Align::kRight});
  columns.push_back({"algbw", Align::kRight});
  columns.push_back({"busbw", Align::kRight});
  columns.push_back({"winner"});
  TextTable table(std::move(columns));
  for (const v1::ProblemResult& result : sizes) {
    std::vector<std::string> row(titles.size() + 4, "- ");
    row[titles.size() + 1] = row[titles.size() + 2] = "-";
    row[0] = FormatBytes(AxisBytes(result));
    const bool has_winner = !result.winner().empty() && result.status() != v1::FAILED;
    for (const v1::CandidateResult& c : result.ranked()) {
      if (c.index() < 0 || !c.ok()) continue;
      const bool won = has_winner && c.index() == result.winner_index();
      row[c.index() + 1] = Us(c.median_us()) + (won ? "*" : " ");
      if (won) {
        row[titles.size() + 1] = BandwidthCell(c.algbw_gbps());
        row[titles.size() + 2] = BandwidthCell(c.busbw_gbps());
      }
    }
    std::string winner;
    if (has_winner) {
      const int w = result.winner_index();
      winner = (w >= 0 && static_cast<size_t>(w) < titles.size() && !titles[w].empty())
                   ? titles[w]
                   : result.winner();
    }
    if (result.status() != v1::TUNED) {
      winner = winner.empty() ? Status(result)
                              : absl::StrCat(winner, " (", Status(result), ")");
    }
    row.back() = winner;
    table.AddRow(std::move(row));
  }
  std::string skipped;
  for (const v1::ProblemResult& result : sizes) {
    if (result.skipped()) {
      absl::StrAppend(&skipped, FormatBytes(AxisBytes(result)), " ", result.reason(), "\n");
    }
  }
  return absl::StrCat(ProblemKind(sizes[0].problem()),
                      ": median us per candidate (the ranking statistic), * = winner;\n"
                      "algbw, busbw: the winner's, GB/s\n",
                      table.Render("  "), skipped);
}

std::string FormatCsv(const std::vector<v1::ProblemResult>& results) {
  std::string out =
      "bytes,collective,dtype,candidate,rank,won,ok,mean_us,median_us,min_us,max_us,"
      "spread,algbw_gbps,busbw_gbps,iterations,status,reason,vs_winner,vs_winner_low,"
      "vs_winner_high\n";
  for (const v1::ProblemResult& result : results) {
    const v1::Problem& p = result.problem();
    const bool has_winner = !result.winner().empty() && result.status() != v1::FAILED;
    int rank = 0;
    for (const v1::CandidateResult& c : result.ranked()) {
      const bool won = has_winner && c.index() == result.winner_index();
      const std::vector<std::string> fields = {
          absl::StrCat(AxisBytes(result)), CollectiveName(p.collective()),
          DTypeName(p.dtype()), FormatCandidate(c.candidate()),
          c.ok() ? absl::StrCat(++rank) : "", won ? "1" : "0", c.ok() ? "1" : "0",
          CsvNumber(c.mean_us()), CsvNumber(c.median_us()), CsvNumber(c.min_us()),
          CsvNumber(c.max_us()), c.ok() ? CsvNumber(c.spread()) : "",
          c.ok() ? CsvNumber(c.algbw_gbps()) : "", c.ok() ? CsvNumber(c.busbw_gbps()) : "",
          absl::StrCat(c.iterations()), Status(result), c.reason(),
          c.paired() > 0 ? CsvNumber(c.vs_winner()) : "",
          c.paired() > 0 ? CsvNumber(c.vs_winner_low()) : "",
          c.paired() > 0 ? CsvNumber(c.vs_winner_high()) : ""};
      std::vector<std::string> escaped;
      for (const std::string& f : fields) escaped.push_back(CsvField(f));
      absl::StrAppend(&out, absl::StrJoin(escaped, ","), "\n");
    }
    if (result.ranked().empty()) {  // FALLBACK, SKIPPED: nothing measured
      absl::StrAppend(&out, AxisBytes(result), ",", CollectiveName(p.collective()), ",",
                      DTypeName(p.dtype()), ",", CsvField(WinnerLabel(result)), ",,",
                      has_winner ? "1" : "0", ",0,,,,,,,,0,", Status(result), ",",
                      CsvField(result.reason()), ",,,\n");
    }
  }
  return out;
}

std::string FormatDispatchTable(const v1::DispatchTable& table,
                                const v1::Problem& problem) {
  const auto& candidates = problem.candidates();
  TextTable out({{"from", Align::kRight},
                 {"to", Align::kRight},
                 {"elements", Align::kRight},
                 {"winner"}});
  for (const v1::SizeRange& range : table.ranges()) {
    std::string winner = range.winner();
    const int w = range.winner_index();
    if (w >= 0 && w < candidates.size() && candidates[w].impl() == range.winner()) {
      winner = FormatCandidate(candidates[w]);
    }
    if (winner.empty()) winner = "(none)";
    out.AddRow({FormatBytes(range.min_bytes()), FormatBytes(range.max_bytes()),
                range.min_count() == range.max_count()
                    ? absl::StrCat(range.min_count())
                    : absl::StrCat(range.min_count(), "-", range.max_count()),
                winner});
  }
  return "dispatch table:\n" + out.Render("  ");
}

std::string FormatImplementations(
    const v1::ListImplementationsResponse& response) {
  TextTable table({{"implementation"},
                   {"dtypes"},
                   {"ops"},
                   {"ranks", Align::kRight},
                   {"align", Align::kRight},
                   {"p2p"},
                   {"params"},
                   {"description"}});
  for (const v1::Implementation& impl : response.implementations()) {
    std::vector<std::string> params;
    for (const v1::ParamSpec& p : impl.params()) {
      params.push_back(absl::StrCat(p.name(), "=", p.default_value(), "[",
                                    p.min_value(), "..", p.max_value(), "]"));
    }
    table.AddRow({impl.name(), JoinEnums(impl.dtypes(), DTypeNameInt),
                  IsReducing(impl.collective()) ? JoinEnums(impl.ops(), OpNameInt)
                                                : "-",
                  WorldSizes(impl),
                  impl.alignment_bytes() > 1 ? FormatBytes(impl.alignment_bytes())
                                             : "-",
                  impl.needs_p2p() ? "yes" : "no",
                  params.empty() ? "-" : absl::StrJoin(params, " "),
                  impl.description()});
  }
  std::string out = table.Render();
  absl::StrAppend(&out, response.implementations_size(), " implementations");
  if (!response.catalogue_version().empty()) {
    absl::StrAppend(&out, ", catalogue ", response.catalogue_version());
  }
  return out + "\n";
}

std::string FormatNodeInfo(const v1::NodeInfoResponse& info) {
  TextTable facts({{"", Align::kLeft}, {""}});
  auto add = [&](const std::string& key, const std::string& value) {
    if (!value.empty()) facts.AddRow({key, value});
  };
  add("host", info.hostname());
  const v1::NodeMetrics& m = info.metrics();
  add("daemon", absl::StrCat(info.daemon_version(), ", up ", Duration(info.uptime_s()), ", ",
                             info.rounds_served(), " rounds served",
                             m.rounds_in_flight() > 0
                                 ? absl::StrCat(", ", m.rounds_in_flight(), " in flight")
                                 : "",
                             m.draining() ? ", draining" : ""));
  add("backend", info.backend());
  std::vector<std::string> versions;
  if (!info.driver_version().empty()) versions.push_back("driver " + info.driver_version());
  if (!info.cuda_version().empty()) versions.push_back("CUDA " + info.cuda_version());
  if (!info.nccl_version().empty()) versions.push_back("NCCL " + info.nccl_version());
  add("versions", absl::StrJoin(versions, ", "));
  add("catalogue", info.catalogue_version());
  add("fingerprint", info.fingerprint());
  // A daemon without a cache (--no_cache) reports no directory and no epoch.
  if (info.cache_dir().empty() && info.cache_epoch().empty()) {
    add("cache", "off");
  } else {
    add("cache", absl::StrCat(info.cache_entries(), " entries",
                              info.cache_dir().empty() ? "" : " in ", info.cache_dir(),
                              info.cache_epoch().empty() ? "" : ", epoch ",
                              info.cache_epoch()));
  }
  if (info.memory_cap_bytes() > 0) {
    add("memory cap", absl::StrCat(FormatBytes(info.memory_cap_bytes()),
                                   info.backend() == "sim" ? " (all ranks together, host memory)"
                                                           : " per GPU"));
  }
  // NodeMetrics in brief; --json info has every figure.
  const int64_t rejected =
      m.rejected_invalid() + m.rejected_draining() + m.rejected_overloaded();
  add("results",
      absl::StrCat("tuned ", m.results_tuned(), ", cached ", m.results_cached(), ", fallback ",
                   m.results_fallback(), ", failed ", m.results_failed(), "; ", rejected,
                   " calls refused (invalid ", m.rejected_invalid(), ", draining ",
                   m.rejected_draining(), ", overloaded ", m.rejected_overloaded(), ")"));
  add("metrics", info.metrics_address().empty()
                     ? "off"
                     : absl::StrCat("http://", info.metrics_address(), "/metrics"));
  add("peer port", info.peer_address().empty() ? "off" : info.peer_address());
  add("gpus", absl::StrCat(info.gpus_size()));
  // Drop the empty title row of the key/value table.
  std::string rendered = facts.Render();
  std::string out = rendered.substr(rendered.find('\n') + 1);

  if (info.gpus_size() > 0) {
    TextTable gpus({{"gpu", Align::kRight}, {"name"}, {"memory", Align::kRight},
                    {"free at start", Align::kRight}, {"pci bus"}});
    for (const v1::Gpu& gpu : info.gpus()) {
      gpus.AddRow({absl::StrCat(gpu.index()), gpu.name(),
                   gpu.memory_bytes() > 0 ? FormatBytes(gpu.memory_bytes()) : "-",
                   gpu.free_bytes() > 0 ? FormatBytes(gpu.free_bytes()) : "-",
                   gpu.pci_bus_id()});
    }
    out += "\n" + gpus.Render("  ");
  }
  const int n = info.gpus_size();
  if (n > 0 && info.topology_size() == n * n) {
    std::vector<TextTable::Column> columns = {{""}};
    for (int i = 0; i < n; ++i) columns.push_back({absl::StrCat("GPU", i)});
    TextTable topo(std::move(columns));
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> row = {absl::StrCat("GPU", i)};
      for (int j = 0; j < n; ++j) row.push_back(info.topology(i * n + j));
      topo.AddRow(std::move(row));
    }
    out += "\ntopology:\n" + topo.Render("  ");
  }
  return out;
}

std::string FormatCacheList(const v1::ListCacheResponse& response) {
  std::string out;
  if (response.entries_size() > 0) {
    TextTable table({{"problem"},
                     {"world", Align::kRight},
                     {"links"},
                     {"winner"},
                     {"mean us", Align::kRight},
                     {"measured"},
                     {"key"}});
    for (const v1::CacheEntrySummary& e : response.entries()) {
      table.AddRow({DescribeProblem(e.problem()), absl::StrCat(e.world_size()),
                    e.links().empty() ? "-" : e.links(), e.winner(), Us(e.winner_mean_us()),
                    UnixMillis(e.measured_unix_ms()), e.key()});
    }
    out = table.Render();
  }
  absl::StrAppend(&out, response.entries_size(), " cache entries");
  if (response.corrupt_files_ignored() > 0) {
    absl::StrAppend(&out, ", ", response.corrupt_files_ignored(),
                    " corrupt files ignored");
  }
  return out + "\n";
}

std::string FormatClearCache(const v1::ClearCacheResponse& response) {
  if (response.not_removed() > 0) {
    return absl::StrCat("removed ", response.removed(), " cache entries; ",
                        response.not_removed(),
                        " files could not be removed (see the daemon's log)\n");
  }
  return absl::StrCat("removed ", response.removed(), " cache entries\n");
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message,
                                   bool multiline) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = multiline;
  options.always_print_primitive_fields = true;
  options.preserve_proto_field_names = true;
  std::string out;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &out, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print as JSON: ", status.ToString()));
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out + "\n";
}

}  // namespace cli
}  // namespace autotuned
