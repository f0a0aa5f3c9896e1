// Rendezvous benchmark (not a test): prints figures for running daemons that
// bench/rendezvous.sh starts on the sim backend. Two modes:
//
//   --mode=hit    one client, one cached Tune request asked --calls times over
//                 the Unix socket: p50/p99/max latency against the 200 us target.
//   --mode=round  per-rank rounds: every rank a thread with its own channel to
//                 its daemon's Unix socket (rank r on daemon r / ranks_per_daemon),
//                 released together; a fresh problem set each round (the daemons
//                 run with --no_cache, so each round is measured). After each
//                 per-rank round the leader (the first socket) is asked the same
//                 problems as a whole_group request of the same world size: that
//                 call is measuring plus one plain request's cost, so the
//                 per-rank latency of the last rank to arrive minus it is the
//                 coordination overhead of the round.
//
//   rendezvous_bench --mode=round --sockets=a.sock,b.sock --peers=127.0.0.1:p1,...
//                    --ranks_per_daemon=2 --problems=1 --rounds=30 --title=...
#include <algorithm>
#include <fstream>
#include <atomic>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "proto/autotuned.grpc.pb.h"

ABSL_FLAG(std::string, mode, "round", "hit or round");
ABSL_FLAG(std::string, sockets, "", "comma-separated Unix sockets, the leader's first");
ABSL_FLAG(std::string, peers, "", "comma-separated peer_advertise names, same order "
          "(empty: one daemon, members' daemon left empty)");
ABSL_FLAG(int, ranks_per_daemon, 4, "ranks on each daemon (mode=round)");
ABSL_FLAG(int, problems, 1, "problems per round (mode=round)");
ABSL_FLAG(int, rounds, 30, "rounds (mode=round)");
ABSL_FLAG(int, calls, 5000, "calls (mode=hit)");
ABSL_FLAG(int64_t, base_count, 4096, "element count of the first round's first problem; "
          "each problem of each round gets a new one");
ABSL_FLAG(bool, whole_group, true, "also time a whole_group request of the same problems");
ABSL_FLAG(std::string, expect, "TUNED", "the status every rank's answer should carry for "
          "a round to count (TUNED; FALLBACK for a leader too small to measure)");
ABSL_FLAG(std::string, latencies_out, "", "writes the group id and each counted round's "
          "last-rank latency (us) here, for bench/rendezvous_pair.py");
ABSL_FLAG(std::string, title, "", "printed before the figures");

namespace autotuned {
namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return v[i];
}

std::string Stats(const std::vector<double>& us) {
  char buf[256];
  snprintf(buf, sizeof(buf), "n %4zu  p50 %10.1f us  p90 %10.1f us  p99 %10.1f us  min %10.1f us  max %10.1f us",
           us.size(), Percentile(us, 0.5), Percentile(us, 0.9), Percentile(us, 0.99),
           Percentile(us, 0.0), Percentile(us, 1.0));
  return buf;
}

std::unique_ptr<v1::Autotune::Stub> Connect(const std::string& socket) {
  grpc::ChannelArguments args;
  args.SetInt("grpc.use_local_subchannel_pool", 1);  // a connection per client
  return v1::Autotune::NewStub(grpc::CreateCustomChannel(
      "unix:" + socket, grpc::InsecureChannelCredentials(), args));
}

void AddProblem(v1::TuneRequest* req, int64_t count) {
  v1::Problem* p = req->add_problems();
  p->set_collective(v1::ALL_REDUCE);
  p->set_dtype(v1::FLOAT32);
  p->set_count(count);
  p->add_candidates()->set_impl("all_reduce/ring");
  p->add_candidates()->set_impl("all_reduce/one_shot");
}

void SetOptions(v1::TuneRequest* req) {
  req->mutable_options()->set_warmup(1);
  req->mutable_options()->set_iterations(3);
  // Wide enough that threads released together on a busy 2-core machine all
  // make it; a round is measured as soon as the last rank has asked.
  req->mutable_options()->set_presync_window_us(3000000);
}

grpc::Status Call(v1::Autotune::Stub* stub, const v1::TuneRequest& req, v1::TuneResponse* resp) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return stub->Tune(&ctx, req, resp);
}

// Warms a channel (connects) without touching the rendezvous.
void Warm(v1::Autotune::Stub* stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  v1::NodeInfoRequest req;
  v1::NodeInfoResponse resp;
  stub->NodeInfo(&ctx, req, &resp);
}

int Hit(const std::string& socket) {
  auto stub = Connect(socket);
  v1::TuneRequest req;
  req.mutable_group()->set_id("hit");
  req.mutable_group()->set_world_size(4);
  req.mutable_options()->set_warmup(1);
  req.mutable_options()->set_iterations(5);
  AddProblem(&req, 262144);  // 1 MiB float32
  v1::TuneResponse resp;
  grpc::Status s = Call(stub.get(), req, &resp);
  if (!s.ok()) {
    fprintf(stderr, "rendezvous_bench: priming: %s\n", s.error_message().c_str());
    return 1;
  }
  printf("priming call: status %s\n", v1::DecisionStatus_Name(resp.results(0).status()).c_str());
  for (int i = 0; i < 100; ++i) Call(stub.get(), req, &resp);  // warm-up calls, not counted
  const int calls = absl::GetFlag(FLAGS_calls);
  std::vector<double> us;
  int64_t errors = 0;
  for (int i = 0; i < calls; ++i) {
    const auto t0 = Clock::now();
    s = Call(stub.get(), req, &resp);
    const double d = Us(Clock::now() - t0);
    if (!s.ok() || resp.results(0).status() != v1::CACHED) {
      ++errors;
    } else {
      us.push_back(d);
    }
  }
  printf("cache hit, one client, Unix socket, %d calls (after 100 uncounted warm-up calls), "
         "%lld errors/non-CACHED\n", calls, static_cast<long long>(errors));
  printf("  latency %s\n", Stats(us).c_str());
  const double p99 = Percentile(us, 0.99);
  printf("  target p99 < 200 us: p99 %.1f us -> %s\n", p99, p99 < 200 ? "MET" : "NOT MET");
  // The floor: the same channel, the cheapest unary call the daemon serves
  // (NodeInfo), so that the cost of gRPC itself on this machine is on record
  // beside the cache hit's.
  std::vector<double> floor_us;
  for (int i = 0; i < calls; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    v1::NodeInfoRequest info_req;
    v1::NodeInfoResponse info_resp;
    const auto t0 = Clock::now();
    const grpc::Status info = stub->NodeInfo(&ctx, info_req, &info_resp);
    const double d = Us(Clock::now() - t0);
    if (info.ok()) floor_us.push_back(d);
  }
  printf("  floor: NodeInfo on the same channel, %d calls: %s\n", calls, Stats(floor_us).c_str());
  return errors == 0 ? 0 : 1;
}

struct RankTiming {
  Clock::time_point sent, answered;
  grpc::Status status;
  v1::TuneResponse resp;
};

int Round() {
  const std::vector<std::string> sockets =
      absl::StrSplit(absl::GetFlag(FLAGS_sockets), ',', absl::SkipEmpty());
  const std::vector<std::string> peers =
      absl::StrSplit(absl::GetFlag(FLAGS_peers), ',', absl::SkipEmpty());
  const int per = absl::GetFlag(FLAGS_ranks_per_daemon);
  const int world = per * static_cast<int>(sockets.size());
  const int problems = absl::GetFlag(FLAGS_problems);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  const bool whole = absl::GetFlag(FLAGS_whole_group);
  const std::string expect = absl::GetFlag(FLAGS_expect);
  int64_t count = absl::GetFlag(FLAGS_base_count);

  std::vector<std::unique_ptr<v1::Autotune::Stub>> stubs;
  for (int r = 0; r < world; ++r) {
    stubs.push_back(Connect(sockets[r / per]));
    Warm(stubs.back().get());
  }
  auto leader = Connect(sockets[0]);
  Warm(leader.get());

  const std::string group = absl::StrCat("bench-", absl::ToUnixMicros(absl::Now()));
  std::map<int, double> last_by_round;
  std::vector<double> last_ask_last_ans;
  std::vector<double> last_us, wall_us, spread_us, whole_us, overhead_us, last_minus_first_ans;
  std::map<std::string, int> statuses, whole_statuses;
  for (int round = 0; round < rounds; ++round) {
    std::vector<int64_t> counts;
    for (int i = 0; i < problems; ++i) counts.push_back(count += 4);
    std::vector<v1::TuneRequest> asks(world);
    for (int r = 0; r < world; ++r) {
      v1::Group* g = asks[r].mutable_group();
      g->set_id(group);
      g->set_world_size(world);
      g->set_rank(r);
      for (int m = 0; m < world; ++m) {
        v1::Member* mem = g->add_members();
        mem->set_rank(m);
        mem->set_local_gpu(m % per);
        if (!peers.empty()) mem->set_daemon(peers[m / per]);
      }
      SetOptions(&asks[r]);
      for (int64_t c : counts) AddProblem(&asks[r], c);
    }
    double whole_call = -1;
    auto whole_group_call = [&] {
      v1::TuneRequest req;
      req.mutable_group()->set_id(group + "-whole");
      req.mutable_group()->set_world_size(world);
      SetOptions(&req);
      req.mutable_options()->set_refresh(true);
      for (int64_t c : counts) AddProblem(&req, c);
      v1::TuneResponse resp;
      const auto t0 = Clock::now();
      grpc::Status s = Call(leader.get(), req, &resp);
      whole_call = Us(Clock::now() - t0);
      std::string st = s.ok() ? v1::DecisionStatus_Name(resp.results(0).status())
                              : absl::StrCat("error ", s.error_code(), ": ", s.error_message());
      ++whole_statuses[st];
      if (st != "TUNED") whole_call = -1;
    };
    // Odd rounds time the whole_group call first, even rounds after, so that
    // drift on the shared machine does not favour either.
    if (whole && round % 2 == 1) whole_group_call();
    std::vector<RankTiming> t(world);
    const auto go = Clock::now() + std::chrono::milliseconds(20);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        std::this_thread::sleep_until(go - std::chrono::milliseconds(2));
        while (Clock::now() < go) {}
        t[r].sent = Clock::now();
        t[r].status = Call(stubs[r].get(), asks[r], &t[r].resp);
        t[r].answered = Clock::now();
      });
    }
    for (std::thread& th : threads) th.join();
    bool all_tuned = true;
    for (int r = 0; r < world; ++r) {
      std::string st;
      if (!t[r].status.ok()) {
        st = absl::StrCat("error ", t[r].status.error_code(), ": ", t[r].status.error_message());
      } else {
        for (const auto& p : t[r].resp.results()) {
          if (v1::DecisionStatus_Name(p.status()) != expect) {
            st = absl::StrCat(v1::DecisionStatus_Name(p.status()), " ", p.reason());
            break;
          }
        }
        if (st.empty()) st = expect;
      }
      if (st != expect) all_tuned = false;
      ++statuses[st];
    }
    int last = 0;
    auto first_sent = t[0].sent, last_answer = t[0].answered, first_answer = t[0].answered;
    for (int r = 1; r < world; ++r) {
      if (t[r].sent > t[last].sent) last = r;
      first_sent = std::min(first_sent, t[r].sent);
      last_answer = std::max(last_answer, t[r].answered);
      first_answer = std::min(first_answer, t[r].answered);
    }
    if (whole && round % 2 == 0) whole_group_call();
    if (!all_tuned) continue;
    const double lat = Us(t[last].answered - t[last].sent);
    last_us.push_back(lat);
    last_by_round[round] = lat;
    last_ask_last_ans.push_back(Us(last_answer - t[last].sent));
    wall_us.push_back(Us(last_answer - first_sent));
    spread_us.push_back(Us(t[last].sent - first_sent));
    last_minus_first_ans.push_back(Us(last_answer - first_answer));
    if (whole_call >= 0) {
      whole_us.push_back(whole_call);
      overhead_us.push_back(lat - whole_call);
    }
  }

  printf("%s\n", absl::GetFlag(FLAGS_title).c_str());
  printf("  %d daemon(s) x %d rank(s) = world %d, %d problem(s) per round (all_reduce float32, "
         "2 candidates, warmup 1, iterations 3), %d rounds\n",
         static_cast<int>(sockets.size()), per, world, problems, rounds);
  printf("  presync window 3 s (never reached)%s\n",
         whole ? "; whole_group call: refresh, timed before the per-rank round on odd rounds, "
                 "after it on even ones" : "");
  printf("  per-rank answers:");
  for (const auto& [st, n] : statuses) printf("  %s x%d", st.c_str(), n);
  printf("\n");
  if (whole) {
    printf("  whole_group answers at the leader:");
    for (const auto& [st, n] : whole_statuses) printf("  %s x%d", st.c_str(), n);
    printf("\n");
  }
  printf("  (rounds where every rank got %s only)\n", expect.c_str());
  printf("  ask spread (first ask sent -> last ask sent)          %s\n", Stats(spread_us).c_str());
  printf("  last rank to ask: ask sent -> its answer             %s\n", Stats(last_us).c_str());
  printf("  last ask sent -> last answer                          %s\n", Stats(last_ask_last_ans).c_str());
  printf("  round wall time (first ask sent -> last answer)      %s\n", Stats(wall_us).c_str());
  printf("  answer spread (first answer -> last answer)          %s\n",
         Stats(last_minus_first_ans).c_str());
  if (whole) {
    printf("  whole_group call of the same problems at the leader  %s\n", Stats(whole_us).c_str());
    printf("  overhead = last rank's latency - whole_group call, paired per round:\n");
    printf("                                                       %s\n", Stats(overhead_us).c_str());
    printf("  median(last rank latency) - median(whole_group call) = %.1f us\n",
           Percentile(last_us, 0.5) - Percentile(whole_us, 0.5));
  }
  const std::string lat_path = absl::GetFlag(FLAGS_latencies_out);
  if (!lat_path.empty()) {
    // For bench/rendezvous_pair.py, which pairs them with the leader's log
    // once the leader has exited (its log is flushed then).
    std::ofstream out(lat_path);
    out << "group " << group << "\n";
    for (const auto& [round, us] : last_by_round) out << round << " " << us << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace autotuned

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "hit") return autotuned::Hit(absl::GetFlag(FLAGS_sockets));
  if (mode == "round") return autotuned::Round();
  fprintf(stderr, "rendezvous_bench: --mode must be hit or round\n");
  return 2;
}
