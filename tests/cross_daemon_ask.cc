// One round of per-rank asks for a group spread over several daemons, K ranks
// on each (--ranks_per_daemon): rank r asks daemon r / K (its Unix socket),
// every member listed with its daemon's peer address and local GPU r % K, all
// ranks at once. Prints each rank's answer, one line per candidate, and
// exits 0 when every rank got the same answer with
// status --expect (the same winner, the same ranking and reasons).
//
//   cross_daemon_ask --sockets=A.sock,B.sock --peers=127.0.0.1:7001,127.0.0.1:7002
//       --group=g1 --candidates=all_reduce/nccl,all_reduce/one_shot --expect=TUNED
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/cli/enums.h"
#include "proto/autotuned.grpc.pb.h"

ABSL_FLAG(std::string, sockets, "", "comma-separated Unix sockets, one per rank");
ABSL_FLAG(std::string, peers, "", "comma-separated peer_advertise addresses, same order");
ABSL_FLAG(std::string, group, "cross", "group id");
ABSL_FLAG(std::string, candidates, "all_reduce/nccl,all_reduce/one_shot",
          "comma-separated all_reduce candidates");
ABSL_FLAG(std::string, dtype, "bf16", "bf16 or fp32");
ABSL_FLAG(int64_t, count, 524288, "elements (524288 bf16 = 1 MiB)");
ABSL_FLAG(int64_t, timeout_ms, 20000, "per candidate");
ABSL_FLAG(std::string, expect, "TUNED", "the status every rank's answer must carry");
ABSL_FLAG(int, ranks_per_daemon, 1, "ranks on each daemon (on its GPUs 0..K-1)");
ABSL_FLAG(std::string, timing, "", "event_loop or cuda_graph (empty: the daemon's default)");

namespace v1 = autotuned::v1;

namespace {

// The answer without what legitimately differs between ranks' replies.
std::string Describe(const v1::TuneResponse& resp) {
  std::string out;
  for (const v1::ProblemResult& p : resp.results()) {
    absl::StrAppend(&out, "  status ", v1::DecisionStatus_Name(p.status()), " winner ",
                    p.winner(), p.reason().empty() ? "" : " reason: ", p.reason(), "\n");
    for (const v1::CandidateResult& c : p.ranked()) {
      if (c.ok()) {
        char buf[256];
        snprintf(buf, sizeof(buf),
                 "    %-24s median %9.2f us  mean %9.2f us  busbw %7.2f GB/s  timed by %s  ranks:",
                 c.candidate().impl().c_str(), c.median_us(), c.mean_us(), c.busbw_gbps(),
                 v1::TimingMode_Name(c.timed_by()).c_str());
        absl::StrAppend(&out, buf);
        for (double us : c.rank_mean_us()) absl::StrAppend(&out, " ", us);
        absl::StrAppend(&out, "\n");
      } else {
        absl::StrAppend(&out, "    ", c.candidate().impl(), "  ruled out: ", c.reason(), "\n");
      }
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::vector<std::string> sockets =
      absl::StrSplit(absl::GetFlag(FLAGS_sockets), ',', absl::SkipEmpty());
  const std::vector<std::string> peers =
      absl::StrSplit(absl::GetFlag(FLAGS_peers), ',', absl::SkipEmpty());
  const std::vector<std::string> candidates =
      absl::StrSplit(absl::GetFlag(FLAGS_candidates), ',', absl::SkipEmpty());
  const int per_daemon = absl::GetFlag(FLAGS_ranks_per_daemon);
  const int world = static_cast<int>(sockets.size()) * per_daemon;
  if (sockets.size() < 2 || peers.size() != sockets.size() || per_daemon < 1) {
    fprintf(stderr,
            "cross_daemon_ask: need as many --peers as --sockets (at least 2) and "
            "--ranks_per_daemon >= 1\n");
    return 2;
  }
  v1::TimingMode timing = v1::TIMING_MODE_UNSPECIFIED;
  if (!absl::GetFlag(FLAGS_timing).empty()) {
    absl::StatusOr<v1::TimingMode> mode =
        autotuned::cli::ParseTimingMode(absl::GetFlag(FLAGS_timing));
    if (!mode.ok()) {
      fprintf(stderr, "cross_daemon_ask: --timing: %s\n", mode.status().ToString().c_str());
      return 2;
    }
    timing = *mode;
  }
  std::vector<v1::TuneRequest> asks(world);
  for (int r = 0; r < world; ++r) {
    v1::Group* g = asks[r].mutable_group();
    g->set_id(absl::GetFlag(FLAGS_group));
    g->set_world_size(world);
    g->set_rank(r);
    for (int m = 0; m < world; ++m) {
      v1::Member* mem = g->add_members();
      mem->set_rank(m);
      mem->set_daemon(peers[m / per_daemon]);
      mem->set_local_gpu(m % per_daemon);
    }
    v1::Problem* p = asks[r].add_problems();
    p->set_collective(v1::ALL_REDUCE);
    p->set_dtype(absl::GetFlag(FLAGS_dtype) == "fp32" ? v1::FLOAT32 : v1::BFLOAT16);
    p->set_op(v1::SUM);
    p->set_count(absl::GetFlag(FLAGS_count));
    for (const std::string& c : candidates) p->add_candidates()->set_impl(c);
    asks[r].mutable_options()->set_timeout_ms(absl::GetFlag(FLAGS_timeout_ms));
    asks[r].mutable_options()->set_presync_window_us(10000000);
    asks[r].mutable_options()->set_timing_mode(timing);
  }
  std::vector<grpc::Status> status(world);
  std::vector<v1::TuneResponse> resp(world);
  std::vector<double> ms(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto stub = v1::Autotune::NewStub(
          grpc::CreateChannel("unix:" + sockets[r / per_daemon],
                              grpc::InsecureChannelCredentials()));
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
      const auto t0 = std::chrono::steady_clock::now();
      status[r] = stub->Tune(&ctx, asks[r], &resp[r]);
      ms[r] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                  .count();
    });
  }
  for (std::thread& t : threads) t.join();
  int rc = 0;
  std::string first;
  for (int r = 0; r < world; ++r) {
    if (!status[r].ok()) {
      printf("rank %d: error %d: %s\n", r, status[r].error_code(),
             status[r].error_message().c_str());
      rc = 1;
      continue;
    }
    const std::string d = Describe(resp[r]);
    printf("rank %d (%s, backend %s, count %lld, answered in %.0f ms):\n%s", r,
           sockets[r / per_daemon].c_str(), resp[r].backend().c_str(),
           static_cast<long long>(absl::GetFlag(FLAGS_count)), ms[r], d.c_str());
    if (r == 0) first = d;
    if (d != first) {
      printf("FAIL: rank %d's answer differs from rank 0's\n", r);
      rc = 1;
    }
    for (const v1::ProblemResult& p : resp[r].results()) {
      if (v1::DecisionStatus_Name(p.status()) != absl::GetFlag(FLAGS_expect)) {
        printf("FAIL: rank %d: status %s, expected %s\n", r,
               v1::DecisionStatus_Name(p.status()).c_str(), absl::GetFlag(FLAGS_expect).c_str());
        rc = 1;
      }
    }
  }
  return rc;
}
