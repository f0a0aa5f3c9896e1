// autotunectl: the command-line client of the autotuned daemon. Usage in
// client/cli/commands.cc (kUsage); the pieces are in //client/cli:cli_lib.
#include <cstdint>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/cli/args.h"
#include "client/cli/commands.h"
#include "client/cli/completion.h"
#include "client/cli/enums.h"
#include "client/cli/flag_scan.h"
#include "client/cli/nccl_table.h"
#include "client/cpp/client.h"
#include "common/version.h"

// Connection and output.
ABSL_FLAG(std::string, socket, "",
          "unix socket of the daemon (default /run/autotuned/autotuned.sock "
          "or $AUTOTUNED_SOCKET)");
ABSL_FLAG(std::string, address, "", "HOST:PORT of a daemon reached over TCP");
ABSL_FLAG(bool, json, false, "print the daemon's answers as JSON");
ABSL_FLAG(bool, csv, false, "tune, sweep: print CSV instead of the tables");
ABSL_FLAG(absl::Duration, connect_timeout, absl::Seconds(5),
          "how long to wait for the daemon");
ABSL_FLAG(absl::Duration, deadline, autotuned::kDefaultMeasureTimeout,
          "limit of one tune or sweep call");

// The problem.
ABSL_FLAG(std::string, collective, "",
          "all_reduce, all_gather, reduce_scatter, all_to_all or broadcast");
ABSL_FLAG(std::string, dtype, "float32", "float32, bfloat16 or float16");
ABSL_FLAG(std::string, bytes, "", "tune: per-rank size, e.g. 1MiB");
ABSL_FLAG(int32_t, world, 0, "ranks (local GPUs 0..N-1); 0: every GPU");
ABSL_FLAG(std::string, gpus, "", "the ranks' GPUs, e.g. 2,3 (rank r on the r-th); instead of --world");
ABSL_FLAG(std::string, candidates, "",
          "IMPL[:NAME=INT,...],...; empty: every suitable implementation");
ABSL_FLAG(std::string, op, "sum", "all_reduce/reduce_scatter: sum, max, min");
ABSL_FLAG(int32_t, root, 0, "broadcast: the sending rank");
ABSL_FLAG(std::string, splits, "",
          "all_to_all: world*world element counts, row-major");
ABSL_FLAG(std::string, from, "1KiB", "sweep: smallest size");
ABSL_FLAG(std::string, to, "64MiB", "sweep: largest size");
ABSL_FLAG(int64_t, factor, 2, "sweep: ratio of consecutive sizes");
ABSL_FLAG(std::string, collectives, "",
          "tune-nccl: the collectives (default all_reduce,all_gather,reduce_scatter,broadcast)");
ABSL_FLAG(std::string, channels, "", "tune-nccl: channel counts to try beside NCCL's own");
ABSL_FLAG(std::string, out, "", "tune-nccl: the table file (default /var/lib/autotuned/nccl_tuner.table)");

// Measurement options (0: the daemon's defaults).
ABSL_FLAG(int32_t, warmup, 0, "warm-up iterations");
ABSL_FLAG(int32_t, iters, 0, "timed iterations");
ABSL_FLAG(int64_t, timeout_ms, 0, "per-candidate time limit");
ABSL_FLAG(std::string, timing, "", "event_loop or cuda_graph");
ABSL_FLAG(bool, refresh, false, "measure again, ignoring the cache");
ABSL_FLAG(double, min_speedup, 0,
          "the margin before another candidate wins over the first (0.02 = 2 %); "
          "unset: the daemon's default");

namespace autotuned {
namespace cli {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitRpcError = 1;
constexpr int kExitUsage = 2;
constexpr int kExitNotTuned = 3;  // a tune or sweep left a size FALLBACK or FAILED

int UsageError(const absl::Status& status) {
  std::cerr << "autotunectl: " << status.message() << "\n\n" << kShortUsage;
  return kExitUsage;
}

int RpcError(const absl::Status& status, Command command, bool connecting) {
  std::cerr << "autotunectl: "
            << DescribeRpcError(status, command, connecting, absl::GetFlag(FLAGS_deadline))
            << "\n";
  return kExitRpcError;
}

RawFlags ReadFlags(std::set<std::string> given) {
  RawFlags f;
  f.collective = absl::GetFlag(FLAGS_collective);
  f.dtype = absl::GetFlag(FLAGS_dtype);
  f.bytes = absl::GetFlag(FLAGS_bytes);
  f.candidates = absl::GetFlag(FLAGS_candidates);
  f.op = absl::GetFlag(FLAGS_op);
  f.splits = absl::GetFlag(FLAGS_splits);
  f.timing = absl::GetFlag(FLAGS_timing);
  f.from = absl::GetFlag(FLAGS_from);
  f.to = absl::GetFlag(FLAGS_to);
  f.factor = absl::GetFlag(FLAGS_factor);
  f.world = absl::GetFlag(FLAGS_world);
  f.gpus = absl::GetFlag(FLAGS_gpus);
  f.root = absl::GetFlag(FLAGS_root);
  f.warmup = absl::GetFlag(FLAGS_warmup);
  f.iters = absl::GetFlag(FLAGS_iters);
  f.timeout_ms = absl::GetFlag(FLAGS_timeout_ms);
  f.refresh = absl::GetFlag(FLAGS_refresh);
  f.min_speedup = absl::GetFlag(FLAGS_min_speedup);
  f.collectives = absl::GetFlag(FLAGS_collectives);
  f.channels = absl::GetFlag(FLAGS_channels);
  f.out = absl::GetFlag(FLAGS_out);
  f.given = std::move(given);
  return f;
}

// The commands that ask the daemon; those other than tune and sweep decide
// nothing, so their success counts as kTuned.
absl::StatusOr<Outcome> RunOnDaemon(Command command, Client& client, const Plan& plan,
                                    const NcclTablePlan& nccl, v1::Collective only,
                                    const Output& output) {
  absl::Status status;
  switch (command) {
    case Command::kTune: return RunTune(client, plan, output);
    case Command::kSweep: return RunSweep(client, plan, output);
    case Command::kTuneNccl: return RunTuneNccl(client, nccl, output);
    case Command::kList: status = RunList(client, only, output); break;
    case Command::kInfo: status = RunInfo(client, output); break;
    case Command::kCacheList: status = RunCacheList(client, output); break;
    case Command::kCacheClear: status = RunCacheClear(client, output); break;
    case Command::kCompletion: break;  // handled in Main, without a daemon
  }
  if (!status.ok()) return status;
  return Outcome::kTuned;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "-h" || arg == "--help" || arg == "-help" || arg == "help") {
      std::cout << kUsage;
      return kExitOk;
    }
    if (arg == "--version" || arg == "-version") {
      std::cout << "autotunectl " << kDaemonVersion << "\n";
      return kExitOk;
    }
  }
  absl::StatusOr<ScannedArgs> scanned = ScanFlags(args);
  if (!scanned.ok()) return UsageError(scanned.status());
  absl::ParseCommandLine(argc, argv);

  absl::StatusOr<Command> command = ParseCommand(scanned->positional);
  if (!command.ok()) return UsageError(command.status());
  absl::Status applies = CheckFlagsApply(*command, scanned->given);
  if (!applies.ok()) return UsageError(applies);
  const RawFlags flags = ReadFlags(scanned->given);
  if (*command == Command::kCompletion) {
    std::cout << BashCompletion([](const std::string& name) {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
      return flag != nullptr && flag->IsOfType<bool>();
    });
    return kExitOk;
  }

  Plan plan;
  if (*command == Command::kTune || *command == Command::kSweep) {
    absl::StatusOr<Plan> parsed = *command == Command::kTune
                                      ? ParseTuneFlags(flags)
                                      : ParseSweepFlags(flags);
    if (!parsed.ok()) return UsageError(parsed.status());
    plan = *std::move(parsed);
  }
  NcclTablePlan nccl;
  if (*command == Command::kTuneNccl) {
    absl::StatusOr<NcclTablePlan> parsed = ParseTuneNcclFlags(flags);
    if (!parsed.ok()) return UsageError(parsed.status());
    nccl = *std::move(parsed);
  }
  v1::Collective only = v1::COLLECTIVE_UNSPECIFIED;
  if (*command == Command::kList && !flags.collective.empty()) {
    absl::StatusOr<v1::Collective> c = ParseCollective(flags.collective);
    if (!c.ok()) return UsageError(c.status());
    only = *c;
  }
  absl::StatusOr<std::string> target =
      ResolveTarget(absl::GetFlag(FLAGS_socket), absl::GetFlag(FLAGS_address));
  if (!target.ok()) return UsageError(target.status());

  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(*target, absl::GetFlag(FLAGS_connect_timeout));
  if (!client.ok()) return RpcError(client.status(), *command, /*connecting=*/true);
  (*client)->set_measure_timeout(absl::GetFlag(FLAGS_deadline));

  Output output;
  output.json = absl::GetFlag(FLAGS_json);
  output.csv = absl::GetFlag(FLAGS_csv);
  output.out = &std::cout;
  output.err = &std::cerr;
  const absl::StatusOr<Outcome> outcome = RunOnDaemon(*command, **client, plan, nccl, only, output);
  std::cout.flush();
  if (!outcome.ok()) return RpcError(outcome.status(), *command, /*connecting=*/false);
  return *outcome == Outcome::kTuned ? kExitOk : kExitNotTuned;
}

}  // namespace
}  // namespace cli
}  // namespace autotuned

int main(int argc, char** argv) { return autotuned::cli::Main(argc, argv); }
