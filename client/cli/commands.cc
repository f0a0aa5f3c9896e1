#include "client/cli/commands.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <ostream>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cli/format.h"
#include "client/cli/nccl_table.h"
#include "google/protobuf/struct.pb.h"

namespace autotuned {
namespace cli {

const char kShortUsage[] =
    "usage: autotunectl [--socket=PATH | --address=HOST:PORT] [--json | --csv] "
    "COMMAND [--options]\n"
    "  tune   --collective=C --bytes=SIZE [--dtype=T] [--world=N] "
    "[--candidates=LIST] ...\n"
    "  sweep  --collective=C [--from=1KiB] [--to=64MiB] [--factor=2] ...\n"
    "  tune-nccl [--out=FILE] [--world=N] [--collectives=LIST] [--channels=LIST] ...\n"
    "  list   [--collective=C]\n"
    "  info\n"
    "  cache list | cache clear\n"
    "  completion bash\n"
    "run 'autotunectl --help' for every option\n";

const char kUsage[] =
    "usage: autotunectl [--socket=PATH | --address=HOST:PORT] [--json | --csv] "
    "COMMAND [--options]\n"
    "\n"
    "Asks the autotuned daemon which implementation of a collective is the\n"
    "fastest on this node, and shows what it knows.\n"
    "\n"
    "commands:\n"
    "  tune         time the candidates of one problem and rank them\n"
    "    --collective=C     all_reduce, all_gather, reduce_scatter, all_to_all,\n"
    "                       broadcast (required)\n"
    "    --dtype=T          float32 (default), bfloat16, float16; fp32, bf16, fp16\n"
    "    --bytes=SIZE       size of the problem's per-rank count of elements:\n"
    "                       the buffer (all_reduce, broadcast), each rank's input\n"
    "                       (all_gather) or output (reduce_scatter), what goes to\n"
    "                       each peer (all_to_all). 4096, 64KiB, 1MiB, 1GiB; KB,\n"
    "                       MB, GB are powers of 1000. Required unless --splits.\n"
    "    --world=N          ranks = the node's GPUs 0..N-1 (default: all GPUs)\n"
    "    --gpus=G,G,...     the ranks' GPUs instead (rank r on the r-th), e.g. 2,3\n"
    "    --candidates=LIST  comma-separated IMPL or IMPL:NAME=INT,NAME=INT, e.g.\n"
    "                       all_reduce/ring:chunk_kib=64,all_reduce/one_shot; a\n"
    "                       name without '/' gets the collective in front; NCCL's\n"
    "                       algo and proto also by name (nccl:algo=ring,proto=ll128,\n"
    "                       docs/nccl_tuner.md). Default:\n"
    "                       every implementation of the collective in catalogue\n"
    "                       order that supports the dtype, op, world and size\n"
    "    --op=sum|max|min   all_reduce and reduce_scatter (default sum)\n"
    "    --root=R           broadcast: the sending rank (default 0)\n"
    "    --splits=C,C,...   all_to_all: world*world element counts, row-major,\n"
    "                       [src*world+dst] (instead of --bytes)\n"
    "    --warmup=N --iters=N --timeout_ms=MS (per candidate)\n"
    "    --timing=event_loop|cuda_graph  --refresh (measure again, ignore the\n"
    "                       cache); 0 or unset: the daemon's defaults\n"
    "    --min_speedup=F    how much faster than the first working candidate\n"
    "                       another must be to win, a fraction (0.02 = 2 %,\n"
    "                       0 = none); unset: the daemon's defaults.min_speedup\n"
    "  sweep        tune one problem at many sizes: a progress line per size on\n"
    "               stderr, then the table of sizes and the dispatch table\n"
    "    --from=SIZE --to=SIZE --factor=K  sizes from, from*K, ... up to to\n"
    "                       (defaults 1KiB, 64MiB, 2); the other tune options\n"
    "                       except --bytes and --splits\n"
    "               a chart: save the sweep with --csv or --json, then\n"
    "               `python -m autotuned.plot FILE -o FILE.png` (docs/python.md)\n"
    "  tune-nccl    measure NCCL's own algorithms and protocols (a sweep per\n"
    "               collective of its <collective>/nccl candidates) and write\n"
    "               the table the NCCL tuner plugin steers from\n"
    "               (docs/nccl_tuner.md)\n"
    "    --out=FILE         the table (default /var/lib/autotuned/nccl_tuner.table;\n"
    "                       written whole: a temporary file, then a rename)\n"
    "    --collectives=LIST all_reduce,all_gather,reduce_scatter,broadcast (default)\n"
    "    --channels=N,N,... channel counts to try beside NCCL's own (default none)\n"
    "    --from --to --factor --dtype --world --gpus as sweep (defaults 1KiB,\n"
    "                       256MiB, 4, bfloat16); --warmup --iters --timeout_ms\n"
    "                       --timing --refresh as tune\n"
    "  list         the daemon's implementations [--collective=C]\n"
    "  info         the node: GPUs, topology, versions, cache\n"
    "  cache list   the cached rankings\n"
    "  cache clear  remove every cached ranking\n"
    "  completion bash  print a bash completion script; load it with\n"
    "               source <(autotunectl completion bash)\n"
    "\n"
    "global options:\n"
    "  --socket=PATH          the daemon's unix socket (default\n"
    "                         /run/autotuned/autotuned.sock, or $AUTOTUNED_SOCKET)\n"
    "  --address=HOST:PORT    a daemon reached over TCP instead\n"
    "  --json                 print the daemon's answers as JSON (sweep: every\n"
    "                         streamed message on its own line)\n"
    "  --csv                  tune, sweep: instead of the tables, CSV: a\n"
    "                         header row, one row per candidate per size; bytes,\n"
    "                         us and GB/s as plain numbers; last, the time over\n"
    "                         the winner's and its 99 % interval (vs_winner*)\n"
    "  --connect_timeout=DUR  how long to wait for the daemon (default 5s)\n"
    "  --deadline=DUR         limit of one tune or sweep call (default 10m)\n"
    "  --version              print autotunectl's version and exit\n"
    "\n"
    "exit status: 0 ok (tune, sweep: every size TUNED or CACHED), 1 the daemon\n"
    "answered an error or could not be reached (printed as \"autotunectl: CODE:\n"
    "message\"), 2 usage error, 3 tune or sweep answered but some size is\n"
    "FALLBACK or FAILED (nothing was measured to win there)\n";

namespace {

absl::Status Print(const google::protobuf::Message& message, const Output& output,
                   bool multiline = true) {
  absl::StatusOr<std::string> json = ToJson(message, multiline);
  if (!json.ok()) return json.status();
  *output.out << *json;
  return absl::OkStatus();
}

// The world size and the candidates of a tune or a sweep, asking the daemon
// for what the plan leaves open.
struct Resolved {
  int world = 0;
  std::vector<v1::Candidate> candidates;
};

absl::StatusOr<Resolved> Resolve(Client& client, const Plan& plan,
                                 const Output& output) {
  Resolved r;
  r.world = plan.world;
  if (r.world == 0) {
    absl::StatusOr<v1::NodeInfoResponse> info = client.NodeInfo();
    if (!info.ok()) return info.status();
    r.world = info->gpus_size();
    if (r.world == 0) {
      return absl::FailedPreconditionError(
          "the daemon reports no GPUs; give --world");
    }
    absl::Status status = CheckWorld(plan.problem, r.world);
    if (!status.ok()) return status;
  }
  if (plan.problem.candidates_size() > 0) {
    r.candidates.assign(plan.problem.candidates().begin(),
                        plan.problem.candidates().end());
    return r;
  }
  if (plan.world != 0) {
    // More ranks than the node has GPUs: said as such, not as every
    // implementation's rank range (the listing clips those to the node).
    // With candidates given, the daemon's own check says it.
    absl::StatusOr<v1::NodeInfoResponse> info = client.NodeInfo();
    if (!info.ok()) return info.status();
    if (info->gpus_size() > 0 && r.world > info->gpus_size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          plan.gpus.empty() ? "--world: " : "--gpus: ", r.world, " ranks, but this node's ",
          info->backend(), " backend has ", info->gpus_size(),
          " GPUs (autotunectl info lists them)"));
    }
  }
  v1::ListImplementationsRequest request;
  request.set_collective(plan.problem.collective());
  absl::StatusOr<v1::ListImplementationsResponse> catalogue =
      client.ListImplementations(request);
  if (!catalogue.ok()) return catalogue.status();
  std::vector<std::string> skipped;
  absl::StatusOr<std::vector<v1::Candidate>> candidates =
      SelectCandidates(*catalogue, plan.problem, r.world, &skipped);
  if (!candidates.ok()) return candidates.status();
  for (const std::string& line : skipped) {
    *output.err << "autotunectl: not trying " << line << "\n";
  }
  r.candidates = *std::move(candidates);
  return r;
}

Outcome OutcomeOf(const std::vector<v1::ProblemResult>& results) {
  for (const v1::ProblemResult& r : results) {
    if (r.status() != v1::TUNED && r.status() != v1::CACHED) return Outcome::kNotTuned;
  }
  return Outcome::kTuned;
}

// One Sweep call: a progress line per size to err, each size's result into
// `sizes`, and every update to `each` when given.
absl::StatusOr<v1::DispatchTable> SweepWithProgress(
    Client& client, const v1::SweepRequest& request, const Output& output,
    std::vector<v1::ProblemResult>* sizes,
    const std::function<void(const v1::SweepUpdate&)>& each = nullptr) {
  return client.Sweep(request, [&](const v1::SweepUpdate& update) {
    const std::string progress = FormatSweepProgress(update);
    if (!progress.empty()) *output.err << progress << std::endl;
    if (update.has_size_result()) sizes->push_back(update.size_result());
    if (each) each(update);
  });
}

}  // namespace

absl::StatusOr<std::string> ResolveTarget(const std::string& socket,
                                          const std::string& address) {
  if (!socket.empty() && !address.empty()) {
    return absl::InvalidArgumentError("give --socket or --address, not both");
  }
  if (!socket.empty()) {
    return absl::StartsWith(socket, "unix:") ? socket
                                             : absl::StrCat("unix:", socket);
  }
  if (!address.empty()) return address;
  return DefaultTarget();
}

std::string DescribeRpcError(const absl::Status& status, Command command, bool connecting,
                             absl::Duration deadline) {
  std::string line =
      absl::StrCat(absl::StatusCodeToString(status.code()), ": ", status.message());
  const bool measures = command == Command::kTune || command == Command::kSweep ||
                        command == Command::kTuneNccl;
  if (connecting && status.code() == absl::StatusCode::kUnavailable) {
    absl::StrAppend(&line,
                    "; is a daemon running there, and are you in its socket's group? "
                    "--socket=PATH, $AUTOTUNED_SOCKET or --address=HOST:PORT name another");
  } else if (!connecting && measures && status.code() == absl::StatusCode::kDeadlineExceeded &&
             absl::EqualsIgnoreCase(status.message(), "Deadline Exceeded")) {
    absl::StrAppend(&line, " (no answer within --deadline=", absl::FormatDuration(deadline),
                    ", the limit of one ", command == Command::kTuneNccl ? "sweep" : CommandName(command),
                    " call; give a longer one)");
  }
  return line;
}

absl::StatusOr<Outcome> RunTune(Client& client, const Plan& plan, const Output& output) {
  absl::StatusOr<Resolved> resolved = Resolve(client, plan, output);
  if (!resolved.ok()) return resolved.status();
  absl::StatusOr<v1::TuneResponse> response = client.Tune(
      MakeTuneRequest(plan, resolved->world, resolved->candidates));
  if (!response.ok()) return response.status();
  if (output.json) {
    absl::Status printed = Print(*response, output);
    if (!printed.ok()) return printed;
  } else {
    *output.out << (output.csv ? FormatCsv({response->results().begin(),
                                            response->results().end()})
                               : FormatTuneResponse(*response));
  }
  return OutcomeOf({response->results().begin(), response->results().end()});
}

absl::StatusOr<Outcome> RunSweep(Client& client, const Plan& plan, const Output& output) {
  absl::StatusOr<Resolved> resolved = Resolve(client, plan, output);
  if (!resolved.ok()) return resolved.status();
  const v1::SweepRequest request =
      MakeSweepRequest(plan, resolved->world, resolved->candidates);
  std::vector<v1::ProblemResult> sizes;
  absl::Status print_status;
  absl::StatusOr<v1::DispatchTable> table =
      SweepWithProgress(client, request, output, &sizes, [&](const v1::SweepUpdate& update) {
        if (output.json && print_status.ok()) {
          print_status = Print(update, output, /*multiline=*/false);
          output.out->flush();
        }
      });
  if (output.json) {
    if (!table.ok()) return table.status();
    if (!print_status.ok()) return print_status;
    return OutcomeOf(sizes);
  }
  if (output.csv) *output.out << FormatCsv(sizes);
  if (!sizes.empty() && !output.csv) *output.out << FormatSweepTable(sizes);
  if (!table.ok()) return table.status();
  // The canonical problem (parameters filled in) when the daemon sent one.
  const v1::Problem& problem =
      sizes.empty() || sizes[0].problem().candidates().empty()
          ? request.problem()
          : sizes[0].problem();
  if (output.csv) return OutcomeOf(sizes);
  if (!sizes.empty()) *output.out << "\n";
  *output.out << FormatDispatchTable(*table, problem);
  return OutcomeOf(sizes);
}

absl::StatusOr<Outcome> RunTuneNccl(Client& client, const NcclTablePlan& given,
                                     const Output& output) {
  absl::StatusOr<v1::NodeInfoResponse> info = client.NodeInfo();
  if (!info.ok()) return info.status();
  // The file can be written (before minutes of sweeps, not after).
  struct stat st;
  if (stat(given.out.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("--out: ", given.out, " is a directory; name the table file"));
  }
  const std::string tmp = absl::StrCat(given.out, ".tmp");
  {
    std::ofstream probe(tmp, std::ios::trunc);
    if (!probe) {
      return absl::FailedPreconditionError(
          absl::StrCat("--out: cannot write ", tmp, " (the table is written there, then renamed)"));
    }
  }
  std::remove(tmp.c_str());
  NcclTablePlan plan = given;
  if (given.flags.given.count("dtype") == 0) {
    // bfloat16 unless an NCCL entry of the catalogue does not take it (the
    // sim's take float32 only): then float32.
    absl::StatusOr<v1::ListImplementationsResponse> listing =
        client.ListImplementations(v1::ListImplementationsRequest());
    if (!listing.ok()) return listing.status();
    bool bf16 = true;
    for (const Plan& p : plan.sweeps) {
      const std::string impl = p.problem.candidates(0).impl();
      for (const v1::Implementation& i : listing->implementations()) {
        const auto& dtypes = i.dtypes();
        if (i.name() == impl && !dtypes.empty() &&
            std::find(dtypes.begin(), dtypes.end(), v1::BFLOAT16) == dtypes.end()) {
          bf16 = false;
        }
      }
    }
    if (!bf16) {
      absl::StatusOr<NcclTablePlan> fp32 = ParseTuneNcclFlags(given.flags, "float32");
      if (!fp32.ok()) return fp32.status();
      plan = *std::move(fp32);
    }
  }
  std::vector<NcclSweep> sweeps;
  std::vector<v1::ProblemResult> all;
  int world = 0;
  for (const Plan& p : plan.sweeps) {
    absl::StatusOr<Resolved> resolved = Resolve(client, p, output);
    if (!resolved.ok()) return resolved.status();
    world = resolved->world;
    absl::StatusOr<v1::DispatchTable> table = SweepWithProgress(
        client, MakeSweepRequest(p, world, resolved->candidates), output, &all);
    if (!table.ok()) return table.status();
    NcclSweep sweep;
    sweep.collective = p.problem.collective();
    sweep.dtype = p.problem.dtype();
    sweep.candidates = resolved->candidates;
    sweep.table = *std::move(table);
    sweeps.push_back(std::move(sweep));
  }
  std::string existing;  // its rows for other world sizes stay
  {
    std::ifstream f(plan.out);
    char buf[4096];
    while (f && existing.size() < (size_t{1} << 20)) {
      f.read(buf, sizeof(buf));
      existing.append(buf, static_cast<size_t>(f.gcount()));
    }
  }
  absl::StatusOr<std::string> text =
      NcclTableText(world, sweeps, info->fingerprint(), existing);
  if (!text.ok()) return text.status();
  // Written whole: a reader sees the old table or the new one.
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << *text;
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return absl::FailedPreconditionError(absl::StrCat("cannot write ", tmp));
    }
  }
  if (std::rename(tmp.c_str(), plan.out.c_str()) != 0) {
    std::remove(tmp.c_str());
    return absl::FailedPreconditionError(absl::StrCat("cannot rename ", tmp, " to ", plan.out));
  }
  if (output.json) {
    google::protobuf::Struct written;  // {"table": PATH}, the path escaped as JSON
    (*written.mutable_fields())["table"].set_string_value(plan.out);
    absl::Status printed = Print(written, output);
    if (!printed.ok()) return printed;
  } else {
    *output.out << *text << "\nwritten to " << plan.out << "\n";
  }
  return OutcomeOf(all);
}

absl::Status RunList(Client& client, v1::Collective only, const Output& output) {
  v1::ListImplementationsRequest request;
  request.set_collective(only);
  absl::StatusOr<v1::ListImplementationsResponse> response =
      client.ListImplementations(request);
  if (!response.ok()) return response.status();
  if (output.json) return Print(*response, output);
  *output.out << FormatImplementations(*response);
  return absl::OkStatus();
}

absl::Status RunInfo(Client& client, const Output& output) {
  absl::StatusOr<v1::NodeInfoResponse> response = client.NodeInfo();
  if (!response.ok()) return response.status();
  if (output.json) return Print(*response, output);
  *output.out << FormatNodeInfo(*response);
  return absl::OkStatus();
}

absl::Status RunCacheList(Client& client, const Output& output) {
  absl::StatusOr<v1::ListCacheResponse> response = client.ListCache();
  if (!response.ok()) return response.status();
  if (output.json) return Print(*response, output);
  *output.out << FormatCacheList(*response);
  return absl::OkStatus();
}

absl::Status RunCacheClear(Client& client, const Output& output) {
  absl::StatusOr<v1::ClearCacheResponse> response = client.ClearCache();
  if (!response.ok()) return response.status();
  if (output.json) return Print(*response, output);
  *output.out << FormatClearCache(*response);
  return absl::OkStatus();
}

}  // namespace cli
}  // namespace autotuned
