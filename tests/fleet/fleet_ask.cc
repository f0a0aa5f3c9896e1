// Rounds of per-rank asks for one group spread over several daemons, K ranks
// on each (rank r on daemon r / K, its GPU r % K), every rank asking its own
// daemon over its Unix socket at once. For the namespaced fleet harness
// (tests/fleet/README.md): the test reads the outcomes, the benchmark the
// latencies.
//
// Per round and rank it prints one line
//   round N rank R: OUTCOME answer=HASH ms=T
// OUTCOME: the first problem's status (TUNED, CACHED, FALLBACK, FAILED), or
// for an error UNAVAILABLE (the daemon's: its leader unreachable),
// DAEMON_GONE (the rank's call to its own daemon failed) or ERROR_<code>;
// HASH: a hash of what every rank of a round must share
// (tests/round_answer.h; for an error, its code and message). Then per round
//   round N: ranks=6 answered=4 distinct_answers=1 ms=T (slowest rank)
// and at the end the rounds/s and the p50/p99/max of the round times.
// Exit status 0 when, in every round, all ranks that got an answer (status
// OK) got the same one; 1 otherwise; 2 on bad flags.
//
//   fleet_ask --sockets=h0.sock,h1.sock --peers=10.77.0.1:7451,10.77.0.2:7451
//       --ranks_per_daemon=2 --group=g --count=1024 --rounds=1
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "proto/autotuned.grpc.pb.h"
#include "tests/round_answer.h"

ABSL_FLAG(std::string, sockets, "", "comma-separated Unix sockets, one per daemon");
ABSL_FLAG(std::string, peers, "", "comma-separated peer_advertise addresses, same order");
ABSL_FLAG(int, ranks_per_daemon, 1, "ranks on each daemon");
ABSL_FLAG(std::string, group, "fleet", "group id");
ABSL_FLAG(std::string, candidates, "all_reduce/ring,all_reduce/one_shot",
          "comma-separated all_reduce candidates (fp32)");
ABSL_FLAG(int64_t, count, 1024, "elements of the first round's problem");
ABSL_FLAG(bool, new_problem_each_round, false,
          "round N asks for count + N elements (a new round key: measured, not cached)");
ABSL_FLAG(int, rounds, 1, "rounds, one after the other");
ABSL_FLAG(int64_t, window_ms, 3000, "options.presync_window_us, in ms");
ABSL_FLAG(int64_t, timeout_ms, 1000, "options.timeout_ms, per candidate");
ABSL_FLAG(int, iterations, 3, "options.iterations (warmup 1)");
ABSL_FLAG(int64_t, deadline_s, 120, "each rank's call deadline");
ABSL_FLAG(std::string, skip_ranks, "", "comma-separated ranks that do not ask");

namespace v1 = autotuned::v1;

namespace {

struct Fleet {
  std::vector<std::string> sockets;
  std::vector<std::string> peers;
  int per_daemon = 1;
  int world() const { return static_cast<int>(sockets.size()) * per_daemon; }
};

v1::TuneRequest RankAsk(const Fleet& f, int rank, int64_t count) {
  v1::TuneRequest req;
  v1::Group* g = req.mutable_group();
  g->set_id(absl::GetFlag(FLAGS_group));
  g->set_world_size(f.world());
  g->set_rank(rank);
  for (int m = 0; m < f.world(); ++m) {
    v1::Member* mem = g->add_members();
    mem->set_rank(m);
    mem->set_daemon(f.peers[m / f.per_daemon]);
    mem->set_local_gpu(m % f.per_daemon);
  }
  v1::Problem* p = req.add_problems();
  p->set_label("rank" + std::to_string(rank));
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_op(v1::SUM);
  p->set_count(count);
  for (absl::string_view c :
       absl::StrSplit(absl::GetFlag(FLAGS_candidates), ',', absl::SkipEmpty())) {
    p->add_candidates()->set_impl(std::string(c));
  }
  v1::Options* o = req.mutable_options();
  o->set_warmup(1);
  o->set_iterations(absl::GetFlag(FLAGS_iterations));
  o->set_timeout_ms(absl::GetFlag(FLAGS_timeout_ms));
  o->set_presync_window_us(absl::GetFlag(FLAGS_window_ms) * 1000);
  return req;
}

struct Reply {
  bool asked = false;
  grpc::Status status;
  v1::TuneResponse response;
  double ms = 0;
};

Reply AskOne(const std::string& socket, const v1::TuneRequest& req) {
  auto stub = v1::Autotune::NewStub(
      grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::seconds(absl::GetFlag(FLAGS_deadline_s)));
  Reply r;
  r.asked = true;
  const auto t0 = std::chrono::steady_clock::now();
  r.status = stub->Tune(&ctx, req, &r.response);
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
             .count();
  return r;
}

// The first problem's decision in one line: status, winner, reasons.
std::string Describe(const v1::TuneResponse& resp) {
  if (resp.results_size() == 0) return "no results";
  const v1::ProblemResult& p = resp.results(0);
  std::string out = v1::DecisionStatus_Name(p.status()) + " winner " + p.winner();
  if (!p.reason().empty()) out += " (" + p.reason() + ")";
  for (const v1::CandidateResult& c : p.ranked()) {
    out += "; " + c.candidate().impl() + (c.ok() ? " ok" : " ruled out: " + c.reason());
  }
  return out;
}

std::string Outcome(const Reply& r) {
  if (!r.status.ok()) {
    if (r.status.error_code() != grpc::StatusCode::UNAVAILABLE) {
      return "ERROR_" + std::to_string(r.status.error_code());
    }
    // The daemon's own UNAVAILABLE names the leader; any other is the
    // rank's connection to its daemon failing (the daemon is gone).
    return r.status.error_message().rfind("leader ", 0) == 0 ? "UNAVAILABLE" : "DAEMON_GONE";
  }
  if (r.response.results_size() == 0) return "EMPTY";
  return v1::DecisionStatus_Name(r.response.results(0).status());
}

// One round: every asking rank at once. Returns whether the ranks that got
// an answer agree, and the slowest rank's time in *ms.
bool Round(const Fleet& f, int round, const std::set<int>& skip, double* ms) {
  const int64_t count = absl::GetFlag(FLAGS_count) +
                        (absl::GetFlag(FLAGS_new_problem_each_round) ? round : 0);
  std::vector<Reply> replies(f.world());
  std::vector<std::thread> threads;
  for (int r = 0; r < f.world(); ++r) {
    if (skip.count(r) != 0) continue;
    threads.emplace_back([&, r] {
      replies[r] = AskOne(f.sockets[r / f.per_daemon], RankAsk(f, r, count));
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<std::string> answers;
  std::set<size_t> described;
  int answered = 0;
  *ms = 0;
  for (int r = 0; r < f.world(); ++r) {
    const Reply& rep = replies[r];
    if (!rep.asked) continue;
    const std::string shared = autotuned::testing::SharedAnswer(rep.status, rep.response);
    const size_t hash = std::hash<std::string>{}(shared);
    printf("round %d rank %d: %s answer=%016zx ms=%.0f\n", round, r, Outcome(rep).c_str(),
           hash, rep.ms);
    if (described.insert(hash).second) {
      printf("  answer %016zx: %s\n", hash,
             rep.status.ok() ? Describe(rep.response).c_str()
                             : rep.status.error_message().c_str());
    }
    if (rep.status.ok()) {
      ++answered;
      answers.insert(shared);
    }
    *ms = std::max(*ms, rep.ms);
  }
  printf("round %d: ranks=%zu answered=%d distinct_answers=%zu ms=%.0f\n", round,
         threads.size(), answered, answers.size(), *ms);
  fflush(stdout);
  return answers.size() <= 1;
}

double Percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  Fleet f;
  f.sockets = absl::StrSplit(absl::GetFlag(FLAGS_sockets), ',', absl::SkipEmpty());
  f.peers = absl::StrSplit(absl::GetFlag(FLAGS_peers), ',', absl::SkipEmpty());
  f.per_daemon = absl::GetFlag(FLAGS_ranks_per_daemon);
  std::set<int> skip;
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_skip_ranks), ',', absl::SkipEmpty())) {
    skip.insert(std::stoi(std::string(s)));
  }
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (f.sockets.size() < 2 || f.peers.size() != f.sockets.size() || f.per_daemon < 1 ||
      rounds < 1) {
    fprintf(stderr, "fleet_ask: need as many --peers as --sockets (at least 2), "
            "--ranks_per_daemon >= 1 and --rounds >= 1\n");
    return 2;
  }
  bool agreed = true;
  std::vector<double> times;
  const auto t0 = std::chrono::steady_clock::now();
  for (int n = 0; n < rounds; ++n) {
    double ms = 0;
    agreed = Round(f, n, skip, &ms) && agreed;
    times.push_back(ms);
  }
  const double s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  printf("rounds=%d seconds=%.2f rounds_per_s=%.2f round_ms_p50=%.1f round_ms_p99=%.1f "
         "round_ms_max=%.1f\n",
         rounds, s, rounds / s, Percentile(times, 0.5), Percentile(times, 0.99),
         Percentile(times, 1.0));
  if (!agreed) printf("FAIL: ranks of one round got different answers\n");
  return agreed ? 0 : 1;
}
