#include "client/cli/args.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli/candidate.h"
#include "client/cli/enums.h"
#include "client/cli/size.h"

namespace autotuned {
namespace cli {
std::string CommandName(Command command) {
  switch (command) {
    case Command::kTune: return "tune";
    case Command::kSweep: return "sweep";
    case Command::kTuneNccl: return "tune-nccl";
    case Command::kList: return "list";
    case Command::kInfo: return "info";
    case Command::kCacheList: return "cache list";
    case Command::kCacheClear: return "cache clear";
    case Command::kCompletion: return "completion bash";
  }
  return "?";
}

const std::set<std::string>& GlobalFlags() {
  static const auto* flags = new std::set<std::string>{
      "socket", "address", "json", "connect_timeout", "deadline"};
  return *flags;
}

const std::set<std::string>& CommandFlags(Command command) {
  static const auto* tune = new std::set<std::string>{
      "collective", "dtype", "bytes", "world", "gpus", "candidates", "warmup", "iters",
      "timeout_ms", "min_speedup", "op", "root", "splits", "refresh", "timing", "csv"};
  static const auto* sweep = new std::set<std::string>{
      "collective", "dtype", "from", "to", "factor", "world", "gpus", "candidates",
      "warmup", "iters", "timeout_ms", "min_speedup", "op", "root", "refresh", "timing",
      "csv"};
  static const auto* tune_nccl = new std::set<std::string>{
      "collectives", "channels", "out", "dtype", "from", "to", "factor", "world", "gpus",
      "warmup", "iters", "timeout_ms", "refresh", "timing"};
  static const auto* list = new std::set<std::string>{"collective"};
  static const auto* none = new std::set<std::string>{};
  switch (command) {
    case Command::kTune: return *tune;
    case Command::kSweep: return *sweep;
    case Command::kTuneNccl: return *tune_nccl;
    case Command::kList: return *list;
    default: break;
  }
  return *none;
}

namespace {

absl::Status FlagError(absl::string_view flag, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", status.message()));
}

// Everything common to tune and sweep.
absl::StatusOr<Plan> ParseCommon(const RawFlags& flags) {
  Plan plan;
  v1::Problem& p = plan.problem;
  if (flags.collective.empty()) {
    return absl::InvalidArgumentError("--collective is required");
  }
  absl::StatusOr<v1::Collective> collective = ParseCollective(flags.collective);
  if (!collective.ok()) return FlagError("collective", collective.status());
  p.set_collective(*collective);
  absl::StatusOr<v1::DType> dtype = ParseDType(flags.dtype);
  if (!dtype.ok()) return FlagError("dtype", dtype.status());
  p.set_dtype(*dtype);

  if (flags.given.count("op") != 0) {
    if (!IsReducing(p.collective())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--op applies to all_reduce and reduce_scatter, not ",
          CollectiveName(p.collective())));
    }
    absl::StatusOr<v1::ReduceOp> op = ParseReduceOp(flags.op);
    if (!op.ok()) return FlagError("op", op.status());
    p.set_op(*op);
  }
  if (flags.given.count("root") != 0 && p.collective() != v1::BROADCAST) {
    return absl::InvalidArgumentError("--root applies to broadcast only");
  }
  if (flags.root < 0) return absl::InvalidArgumentError("--root must be >= 0");
  p.set_root(flags.root);

  absl::StatusOr<std::vector<v1::Candidate>> candidates =
      ParseCandidateList(flags.candidates);
  if (!candidates.ok()) return FlagError("candidates", candidates.status());
  for (v1::Candidate& c : *candidates) {
    if (!absl::StrContains(c.impl(), '/')) {
      c.set_impl(absl::StrCat(CollectiveName(p.collective()), "/", c.impl()));
    }
    *p.add_candidates() = std::move(c);
  }

  if (flags.world < 0) return absl::InvalidArgumentError("--world must be >= 0");
  plan.world = flags.world;
  if (!flags.gpus.empty()) {
    for (absl::string_view piece : absl::StrSplit(flags.gpus, ',')) {
      int gpu = -1;
      if (!absl::SimpleAtoi(piece, &gpu) || gpu < 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--gpus: \"", piece, "\" is not a GPU index (>= 0)"));
      }
      if (std::find(plan.gpus.begin(), plan.gpus.end(), gpu) != plan.gpus.end()) {
        return absl::InvalidArgumentError(absl::StrCat("--gpus: GPU ", gpu, " is listed twice"));
      }
      plan.gpus.push_back(gpu);
    }
    const int n = static_cast<int>(plan.gpus.size());
    if (plan.world != 0 && plan.world != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--world=", plan.world, " but --gpus lists ", n, " GPUs; give one of them"));
    }
    plan.world = n;
  }
  if (flags.warmup < 0) return absl::InvalidArgumentError("--warmup must be >= 0");
  if (flags.iters < 0) return absl::InvalidArgumentError("--iters must be >= 0");
  if (flags.timeout_ms < 0) {
    return absl::InvalidArgumentError("--timeout_ms must be >= 0");
  }
  plan.options.set_warmup(flags.warmup);
  plan.options.set_iterations(flags.iters);
  plan.options.set_timeout_ms(flags.timeout_ms);
  plan.options.set_refresh(flags.refresh);
  if (flags.given.count("min_speedup")) {
    if (!(flags.min_speedup >= 0)) {
      return absl::InvalidArgumentError("--min_speedup must be >= 0");
    }
    plan.options.set_min_speedup(flags.min_speedup);
  }
  if (!flags.timing.empty()) {
    absl::StatusOr<v1::TimingMode> mode = ParseTimingMode(flags.timing);
    if (!mode.ok()) return FlagError("timing", mode.status());
    plan.options.set_timing_mode(*mode);
  }
  return plan;
}

absl::StatusOr<int64_t> ParsePositiveSize(absl::string_view flag,
                                          absl::string_view text) {
  absl::StatusOr<int64_t> bytes = ParseSize(text);
  if (!bytes.ok()) return FlagError(flag, bytes.status());
  if (*bytes <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be positive"));
  }
  return *bytes;
}

absl::StatusOr<int64_t> ToCount(absl::string_view flag, int64_t bytes,
                                v1::DType dtype) {
  const int64_t size = DTypeSize(dtype);
  if (bytes % size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, ": ", bytes, " bytes is not a whole number of ",
        DTypeName(dtype), " elements (", size, " bytes each)"));
  }
  return bytes / size;
}

}  // namespace

absl::StatusOr<Command> ParseCommand(const std::vector<std::string>& words) {
  if (words.empty()) return absl::InvalidArgumentError("no command given");
  const std::string& first = words[0];
  Command command;
  size_t used = 1;
  if (first == "tune") {
    command = Command::kTune;
  } else if (first == "sweep") {
    command = Command::kSweep;
  } else if (first == "tune-nccl") {
    command = Command::kTuneNccl;
  } else if (first == "list") {
    command = Command::kList;
  } else if (first == "info") {
    command = Command::kInfo;
  } else if (first == "completion") {
    if (words.size() < 2 || words[1] != "bash") {
      return absl::InvalidArgumentError("\"completion\" needs \"bash\"");
    }
    command = Command::kCompletion;
    used = 2;
  } else if (first == "cache") {
    if (words.size() < 2) {
      return absl::InvalidArgumentError("\"cache\" needs \"list\" or \"clear\"");
    }
    if (words[1] == "list") {
      command = Command::kCacheList;
    } else if (words[1] == "clear") {
      command = Command::kCacheClear;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown command \"cache ", words[1], "\" (expected cache list, cache clear)"));
    }
    used = 2;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown command \"", first, "\""));
  }
  if (words.size() > used) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unexpected argument \"", words[used], "\" after \"", CommandName(command),
        "\" (options are --flags)"));
  }
  return command;
}

absl::Status CheckFlagsApply(Command command, const std::set<std::string>& given) {
  if (given.count("json") != 0 && given.count("csv") != 0) {
    return absl::InvalidArgumentError("give --json or --csv, not both");
  }
  const std::set<std::string>& allowed = CommandFlags(command);
  for (const std::string& flag : given) {
    if (GlobalFlags().count(flag) != 0 || allowed.count(flag) != 0) continue;
    // absl's own flags (--flagfile, --fromenv, ...).
    if (CommandFlags(Command::kTune).count(flag) == 0 &&
        CommandFlags(Command::kSweep).count(flag) == 0 &&
        CommandFlags(Command::kTuneNccl).count(flag) == 0) {
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " does not apply to ", CommandName(command)));
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan> ParseTuneFlags(const RawFlags& flags) {
  absl::StatusOr<Plan> plan = ParseCommon(flags);
  if (!plan.ok()) return plan.status();
  v1::Problem& p = plan->problem;
  if (!flags.splits.empty()) {
    if (p.collective() != v1::ALL_TO_ALL) {
      return absl::InvalidArgumentError("--splits applies to all_to_all only");
    }
    if (!flags.bytes.empty()) {
      return absl::InvalidArgumentError(
          "give either --bytes (even splits) or --splits, not both");
    }
    for (absl::string_view piece : absl::StrSplit(flags.splits, ',')) {
      int64_t count = 0;
      if (!absl::SimpleAtoi(piece, &count) || count < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--splits: \"", piece, "\" is not a count (elements, >= 0)"));
      }
      p.add_split_counts(count);
    }
  } else {
    if (flags.bytes.empty()) {
      return absl::InvalidArgumentError("--bytes is required (e.g. --bytes=1MiB)");
    }
    absl::StatusOr<int64_t> bytes = ParsePositiveSize("bytes", flags.bytes);
    if (!bytes.ok()) return bytes.status();
    absl::StatusOr<int64_t> count = ToCount("bytes", *bytes, p.dtype());
    if (!count.ok()) return count.status();
    p.set_count(*count);
  }
  if (plan->world > 0) {
    absl::Status status = CheckWorld(p, plan->world);
    if (!status.ok()) return status;
  }
  return plan;
}

absl::StatusOr<Plan> ParseSweepFlags(const RawFlags& flags) {
  absl::StatusOr<Plan> plan = ParseCommon(flags);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<int64_t> from = ParsePositiveSize("from", flags.from);
  if (!from.ok()) return from.status();
  absl::StatusOr<int64_t> to = ParsePositiveSize("to", flags.to);
  if (!to.ok()) return to.status();
  absl::StatusOr<std::vector<int64_t>> counts =
      SweepCounts(*from, *to, flags.factor, plan->problem.dtype());
  if (!counts.ok()) return counts.status();
  plan->counts = *std::move(counts);
  plan->problem.set_count(plan->counts.front());
  if (plan->world > 0) {
    absl::Status status = CheckWorld(plan->problem, plan->world);
    if (!status.ok()) return status;
  }
  return plan;
}

absl::StatusOr<std::vector<int64_t>> SweepCounts(int64_t from_bytes,
                                                 int64_t to_bytes,
                                                 int64_t factor, v1::DType dtype) {
  if (factor < 2) return absl::InvalidArgumentError("--factor must be >= 2");
  if (from_bytes <= 0) return absl::InvalidArgumentError("--from must be positive");
  if (to_bytes < from_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--to (", FormatBytes(to_bytes), ") is below --from (",
        FormatBytes(from_bytes), ")"));
  }
  absl::StatusOr<int64_t> from = ToCount("from", from_bytes, dtype);
  if (!from.ok()) return from.status();
  const int64_t to = to_bytes / DTypeSize(dtype);
  std::vector<int64_t> counts;
  for (int64_t count = *from; count <= to;) {
    counts.push_back(count);
    if (__builtin_mul_overflow(count, factor, &count)) break;
  }
  return counts;
}

absl::Status CheckWorld(const v1::Problem& problem, int world) {
  if (world <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("world size ", world, " is not positive"));
  }
  const int64_t want = static_cast<int64_t>(world) * world;
  if (problem.split_counts_size() > 0 && problem.split_counts_size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--splits has ", problem.split_counts_size(), " counts; ", world,
        " ranks need ", world, " x ", world, " = ", want));
  }
  if (problem.collective() == v1::BROADCAST && problem.root() >= world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--root=", problem.root(), " is not a rank of a ", world, "-rank group"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<v1::Candidate>> SelectCandidates(
    const v1::ListImplementationsResponse& catalogue, const v1::Problem& problem,
    int world, std::vector<std::string>* skipped) {
  std::vector<v1::Candidate> out;
  std::vector<std::string> reasons;
  const v1::ReduceOp op =
      problem.op() == v1::REDUCE_OP_UNSPECIFIED ? v1::SUM : problem.op();
  const int64_t bytes = problem.count() * DTypeSize(problem.dtype());
  for (const v1::Implementation& impl : catalogue.implementations()) {
    if (impl.collective() != problem.collective()) continue;
    std::string why;
    const auto& dtypes = impl.dtypes();
    const auto& ops = impl.ops();
    if (!dtypes.empty() &&
        std::find(dtypes.begin(), dtypes.end(), problem.dtype()) == dtypes.end()) {
      why = absl::StrCat("does not take ", DTypeName(problem.dtype()));
    } else if (IsReducing(problem.collective()) && !ops.empty() &&
               std::find(ops.begin(), ops.end(), op) == ops.end()) {
      why = absl::StrCat("does not take op ", ReduceOpName(op));
    } else if (world < impl.min_world_size() ||
               (impl.max_world_size() > 0 && world > impl.max_world_size())) {
      // The listing clips max_world_size to the node's GPUs, so on a node
      // smaller than the implementation's minimum it falls below the minimum.
      if (impl.max_world_size() > 0 && impl.max_world_size() < impl.min_world_size()) {
        why = absl::StrCat("needs at least ", impl.min_world_size(),
                           " ranks; this node runs at most ", impl.max_world_size());
      } else if (impl.max_world_size() > 0) {
        why = absl::StrCat("runs on ", impl.min_world_size(), " to ", impl.max_world_size(),
                           " ranks, not ", world);
      } else {
        why = absl::StrCat("runs on ", impl.min_world_size(), " or more ranks, not ", world);
      }
    } else if (problem.split_counts_size() == 0 && impl.alignment_bytes() > 1 &&
               bytes % impl.alignment_bytes() != 0) {
      why = absl::StrCat("needs sizes aligned to ", impl.alignment_bytes(),
                         " bytes");
    }
    if (!why.empty()) {
      reasons.push_back(absl::StrCat(impl.name(), ": ", why));
      continue;
    }
    v1::Candidate c;
    c.set_impl(impl.name());
    out.push_back(std::move(c));
  }
  if (skipped != nullptr) *skipped = reasons;
  if (out.empty()) {
    const std::string collective = CollectiveName(problem.collective());
    if (reasons.empty()) {
      return absl::NotFoundError(absl::StrCat(
          "the daemon offers no implementation of ", collective));
    }
    return absl::FailedPreconditionError(absl::StrCat(
        "no implementation of ", collective, " suits this problem: ",
        absl::StrJoin(reasons, "; ")));
  }
  return out;
}

v1::Group LocalGroup(int world, const std::vector<int>& gpus) {
  v1::Group group;
  group.set_id("autotunectl");
  group.set_world_size(world);
  group.set_whole_group(true);
  for (size_t r = 0; r < gpus.size(); ++r) {
    v1::Member* m = group.add_members();
    m->set_rank(static_cast<int>(r));
    m->set_local_gpu(gpus[r]);
  }
  return group;
}

v1::TuneRequest MakeTuneRequest(const Plan& plan, int world,
                                const std::vector<v1::Candidate>& candidates) {
  v1::TuneRequest request;
  *request.mutable_group() = LocalGroup(world, plan.gpus);
  v1::Problem* problem = request.add_problems();
  *problem = plan.problem;
  problem->clear_candidates();
  for (const v1::Candidate& c : candidates) *problem->add_candidates() = c;
  *request.mutable_options() = plan.options;
  return request;
}

v1::SweepRequest MakeSweepRequest(const Plan& plan, int world,
                                  const std::vector<v1::Candidate>& candidates) {
  v1::SweepRequest request;
  *request.mutable_group() = LocalGroup(world, plan.gpus);
  *request.mutable_problem() = plan.problem;
  request.mutable_problem()->clear_candidates();
  for (const v1::Candidate& c : candidates) {
    *request.mutable_problem()->add_candidates() = c;
  }
  for (int64_t count : plan.counts) request.add_counts(count);
  *request.mutable_options() = plan.options;
  return request;
}

}  // namespace cli
}  // namespace autotuned
