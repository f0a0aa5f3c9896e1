// Regret benchmark (not a test): how good and how stable a daemon's
// decisions are. bench/regret.sh starts one fresh daemon per mode and runs
// this against it.
//
// --reference_out: a long interleaved reference measurement. --rounds
// rounds, each one Tune per problem (refresh, --ref_iterations timed
// iterations), so the candidates run A B C, B C A, C A B, ...; each candidate's
// reference time is the median of its rounds' medians. Written to the file,
// one line per candidate: "PROBLEM IMPL MEDIAN_US".
//
// --reference_in: --tunes fresh tunes of every problem (refresh; the daemon
// runs with its cache off), problems interleaved, with the daemon's own
// defaults. Per problem and over all: the flip rate (tunes whose winner is
// not the problem's most frequent winner), how many flips the daemon
// reported as ties (WITHIN_NOISE or BELOW_MARGIN), the regret of each
// decision (the winner's reference time over the best reference time,
// minus 1) at p50, p95 and max, the verdicts, and the cost per tune
// (timed iterations, measuring time, wall time of the call).
//
//   regret_bench --socket=S --world=2 --problems='all_reduce:256:a,b;...'
//                (--reference_out=F --rounds=20 | --reference_in=F --tunes=30)
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/autotuned.grpc.pb.h"

ABSL_FLAG(std::string, socket, "", "the daemon's Unix socket");
ABSL_FLAG(int, world, 2, "group world size (a whole-group call)");
ABSL_FLAG(std::string, problems, "",
          "problems, ';'-separated, each COLLECTIVE:COUNT:IMPL,IMPL,... (float32, sum); "
          "the first implementation is the default");
ABSL_FLAG(std::string, reference_out, "", "measure the reference and write it here");
ABSL_FLAG(int, rounds, 20, "reference rounds");
ABSL_FLAG(int, ref_iterations, 50, "timed iterations per candidate per reference round");
ABSL_FLAG(std::string, reference_in, "", "run fresh tunes and score them against this reference");
ABSL_FLAG(int, tunes, 30, "fresh tunes per problem");

namespace autotuned {
namespace {

struct Problem {
  v1::Problem wire;
  std::vector<std::string> impls;
  std::string name;
};

std::vector<Problem> ParseProblems(const std::string& text) {
  std::vector<Problem> out;
  for (absl::string_view entry : absl::StrSplit(text, ';', absl::SkipEmpty())) {
    std::vector<std::string> parts = absl::StrSplit(entry, ':');
    v1::Collective collective;
    int64_t count = 0;
    if (parts.size() != 3 || !v1::Collective_Parse(absl::AsciiStrToUpper(parts[0]), &collective) ||
        !absl::SimpleAtoi(parts[1], &count)) {
      std::fprintf(stderr, "regret_bench: bad problem \"%s\"\n", std::string(entry).c_str());
      std::exit(2);
    }
    Problem p;
    p.wire.set_collective(collective);
    p.wire.set_dtype(v1::FLOAT32);
    p.wire.set_count(count);
    p.impls = absl::StrSplit(parts[2], ',', absl::SkipEmpty());
    for (const std::string& impl : p.impls) p.wire.add_candidates()->set_impl(impl);
    p.name = absl::StrCat(parts[0], " x", count, " [", absl::StrJoin(p.impls, ", "), "]");
    out.push_back(std::move(p));
  }
  return out;
}

std::unique_ptr<v1::Autotune::Stub> Connect(const std::string& socket) {
  return v1::Autotune::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
}

// One Tune of one problem; exits on any error (a benchmark of decisions
// has nothing to say about a daemon that does not answer).
v1::ProblemResult Tune(v1::Autotune::Stub& stub, const Problem& p, int iterations,
                       absl::Duration* took) {
  v1::TuneRequest req;
  req.mutable_group()->set_world_size(absl::GetFlag(FLAGS_world));
  req.mutable_group()->set_whole_group(true);
  *req.add_problems() = p.wire;
  req.mutable_options()->set_refresh(true);
  req.mutable_options()->set_timeout_ms(60000);
  if (iterations > 0) req.mutable_options()->set_iterations(iterations);
  v1::TuneResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::minutes(10));
  const absl::Time start = absl::Now();
  grpc::Status s = stub.Tune(&ctx, req, &resp);
  *took = absl::Now() - start;
  if (!s.ok() || resp.results_size() != 1 || resp.results(0).status() != v1::TUNED) {
    std::fprintf(stderr, "regret_bench: %s: %s %s\n", p.name.c_str(), s.error_message().c_str(),
                 resp.results_size() ? resp.results(0).reason().c_str() : "");
    std::exit(1);
  }
  return resp.results(0);
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double Quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5))];
}

int Reference(v1::Autotune::Stub& stub, const std::vector<Problem>& problems) {
  std::vector<std::map<std::string, std::vector<double>>> medians(problems.size());
  for (int r = 0; r < absl::GetFlag(FLAGS_rounds); ++r) {
    for (size_t i = 0; i < problems.size(); ++i) {
      // Round r asks for the candidates rotated by r: none always runs first.
      Problem rotated = problems[i];
      auto* c = rotated.wire.mutable_candidates();
      if (!c->empty()) std::rotate(c->begin(), c->begin() + r % c->size(), c->end());
      absl::Duration took;
      const v1::ProblemResult res =
          Tune(stub, rotated, absl::GetFlag(FLAGS_ref_iterations), &took);
      for (const v1::CandidateResult& c : res.ranked()) {
        if (c.ok()) medians[i][c.candidate().impl()].push_back(c.median_us());
      }
    }
  }
  std::ofstream out(absl::GetFlag(FLAGS_reference_out));
  for (size_t i = 0; i < problems.size(); ++i) {
    std::printf("reference %zu %s:", i, problems[i].name.c_str());
    for (const std::string& impl : problems[i].impls) {
      const double m = Median(medians[i][impl]);
      out << i << " " << impl << " " << m << "\n";
      std::printf(" %s %.1f us", impl.c_str(), m);
    }
    std::printf("\n");
  }
  return out.good() ? 0 : 1;
}

// Per problem: what the tunes decided.
struct Tally {
  std::map<std::string, int> winners;
  std::vector<std::string> winner_of_tune;
  std::vector<v1::Confidence> confidence_of_tune;
  std::vector<double> regret, iterations, measuring_ms, wall_ms;
};

std::string Percent(double f) { return absl::StrCat(absl::SixDigits(100 * f), "%"); }

int Tunes(v1::Autotune::Stub& stub, const std::vector<Problem>& problems) {
  std::map<std::pair<size_t, std::string>, double> ref;
  std::ifstream in(absl::GetFlag(FLAGS_reference_in));
  size_t index;
  std::string impl;
  double us;
  while (in >> index >> impl >> us) ref[{index, impl}] = us;
  std::vector<Tally> tally(problems.size());
  for (int t = 0; t < absl::GetFlag(FLAGS_tunes); ++t) {
    for (size_t i = 0; i < problems.size(); ++i) {
      absl::Duration took;
      const v1::ProblemResult res = Tune(stub, problems[i], 0, &took);
      double best = 0;
      for (const std::string& c : problems[i].impls) {
        const double r = ref[{i, c}];
        if (r > 0 && (best == 0 || r < best)) best = r;
      }
      Tally& y = tally[i];
      y.winners[res.winner()]++;
      y.winner_of_tune.push_back(res.winner());
      y.confidence_of_tune.push_back(res.confidence());
      y.regret.push_back(best > 0 ? ref[{i, res.winner()}] / best - 1 : 0);
      y.iterations.push_back(static_cast<double>(res.measured_iterations()));
      y.measuring_ms.push_back(res.measuring_us() / 1e3);
      y.wall_ms.push_back(absl::ToDoubleMilliseconds(took));
    }
  }
  std::vector<double> regret, iterations, measuring_ms, wall_ms;
  int flips = 0, flips_as_ties = 0, decisions = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const Tally& y = tally[i];
    std::string modal;
    for (const auto& [w, n] : y.winners) {
      if (modal.empty() || n > y.winners.at(modal)) modal = w;
    }
    int f = 0, f_ties = 0;
    std::map<std::string, int> verdicts;
    for (size_t t = 0; t < y.winner_of_tune.size(); ++t) {
      verdicts[v1::Confidence_Name(y.confidence_of_tune[t])]++;
      if (y.winner_of_tune[t] == modal) continue;
      ++f;
      f_ties += y.confidence_of_tune[t] != v1::DECISIVE;
    }
    std::printf("problem %zu %s\n  reference:", i, problems[i].name.c_str());
    for (const std::string& c : problems[i].impls) std::printf(" %.1f", ref[{i, c}]);
    std::printf(" us\n  winners:");
    for (const auto& [w, n] : y.winners) std::printf(" %s %d", w.c_str(), n);
    std::printf("\n  verdicts:");
    for (const auto& [v, n] : verdicts) std::printf(" %s %d", v.c_str(), n);
    std::printf("\n  flips %d of %zu (%d reported as ties); regret p50 %s p95 %s max %s\n"
                "  cost per tune (p50): %.0f timed iterations, %.1f ms measuring, %.1f ms wall\n",
                f, y.winner_of_tune.size(), f_ties, Percent(Quantile(y.regret, 0.5)).c_str(),
                Percent(Quantile(y.regret, 0.95)).c_str(), Percent(Quantile(y.regret, 1)).c_str(),
                Quantile(y.iterations, 0.5), Quantile(y.measuring_ms, 0.5),
                Quantile(y.wall_ms, 0.5));
    flips += f;
    flips_as_ties += f_ties;
    decisions += static_cast<int>(y.winner_of_tune.size());
    for (double r : y.regret) regret.push_back(r);
    for (double v : y.iterations) iterations.push_back(v);
    for (double v : y.measuring_ms) measuring_ms.push_back(v);
    for (double v : y.wall_ms) wall_ms.push_back(v);
  }
  double iterations_sum = 0, wall_sum = 0;
  for (double v : iterations) iterations_sum += v;
  for (double v : wall_ms) wall_sum += v;
  std::printf("summary: %d decisions; flip rate %s (%d flips, %d reported as ties); "
              "regret p50 %s p95 %s max %s; cost per tune: mean %.0f timed iterations, "
              "mean %.1f ms wall\n",
              decisions, Percent(decisions ? static_cast<double>(flips) / decisions : 0).c_str(),
              flips, flips_as_ties, Percent(Quantile(regret, 0.5)).c_str(),
              Percent(Quantile(regret, 0.95)).c_str(), Percent(Quantile(regret, 1)).c_str(),
              decisions ? iterations_sum / decisions : 0, decisions ? wall_sum / decisions : 0);
  return 0;
}

}  // namespace
}  // namespace autotuned

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::vector<autotuned::Problem> problems =
      autotuned::ParseProblems(absl::GetFlag(FLAGS_problems));
  if (problems.empty() || absl::GetFlag(FLAGS_socket).empty() ||
      absl::GetFlag(FLAGS_reference_out).empty() == absl::GetFlag(FLAGS_reference_in).empty()) {
    std::fprintf(stderr, "regret_bench: --socket, --problems and one of --reference_out, "
                         "--reference_in are required\n");
    return 2;
  }
  std::unique_ptr<autotuned::v1::Autotune::Stub> stub =
      autotuned::Connect(absl::GetFlag(FLAGS_socket));
  return absl::GetFlag(FLAGS_reference_out).empty() ? autotuned::Tunes(*stub, problems)
                                                     : autotuned::Reference(*stub, problems);
}
