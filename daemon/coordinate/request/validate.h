// Request validation and translation: the only place where wire messages
// (proto/autotuned.proto) become the daemon's internal problem descriptions
// (ValidRequest, daemon/coordinate/request/valid_request.h).
// Everything a round needs is checked here, before anything runs, so that a
// bad request never starts a half-done round.
//
// Every error is INVALID_ARGUMENT (UNIMPLEMENTED for a group shape this daemon
// version does not serve) with a message that starts with the offending
// field's path, e.g. "problems[0].count: must be positive, got 0".
//
// A candidate its implementation cannot run on the problem (dtype, reduce
// op, world size, buffer alignment: Catalogue::Supports) is not an error
// while another candidate of the problem can run: the engine rules it out
// with that reason, so one candidate list serves every world size and size
// of a sweep. When none can run, the first one's reason is the error.
//
// Candidates the ranks run (Candidate.client; docs/protocol.md, "Candidates
// the ranks run") are not checked against the catalogue; they need ranks
// asking one by one, every rank on this daemon (INVALID_ARGUMENT naming
// "problems[i].candidates[j].client" otherwise), and no Sweep. A problem that
// has one is never refused for its catalogue candidates that cannot run.
//
// Thread-safety: pure functions of their arguments; the context's pointers
// are not owned and must stay valid during the call.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "config/config.pb.h"
#include "daemon/common/problem.h"
#include "daemon/coordinate/request/valid_request.h"
#include "daemon/measure/catalogue/catalogue.h"
#include "daemon/measure/engine/engine.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

// Bounds on the strings of a request (docs/protocol.md, "Requests and errors"); a longer
// or ill-formed one is INVALID_ARGUMENT naming the field. Strings that reach
// logs or error messages are printable ASCII or escaped (daemon/common/escape.h).
inline constexpr size_t kMaxGroupIdBytes = 256;     // group.id: printable ASCII
inline constexpr size_t kMaxDaemonBytes = 256;      // members[].daemon: printable ASCII
inline constexpr size_t kMaxNameBytes = 128;        // candidates' impl and parameter names
inline constexpr size_t kMaxLabelBytes = 1024;      // problems' label: any bytes

// A memory cap that holds anything a request can describe (1 EiB): only
// keeps every buffer size far from int64 overflow.
inline constexpr int64_t kNoCap = int64_t{1} << 60;

// What the service needs to know about the node to validate a request.
struct ValidationContext {
  const Catalogue* catalogue = nullptr;
  const config::Limits* limits = nullptr;
  // The memory cap (MemoryCap of daemon/measure/backend/backend.h), in bytes; 0:
  // limits->max_buffer_bytes. One rank's input and output over it is
  // INVALID_ARGUMENT naming the count (or split_counts).
  int64_t memory_cap_bytes = 0;
  // What a candidate needs against the cap (Backend::MemoryNeed); null:
  // nothing beyond the check above. With it, a problem none of whose
  // catalogue candidates fits is INVALID_ARGUMENT naming the count ("no
  // candidate fits the memory cap ..."); one that some fit is valid, and
  // the engine rules out the others (EngineOptions::memory_cap_bytes).
  std::function<int64_t(const ProblemSpec&, const CandidateSpec&)> memory_need;
  const config::Defaults* defaults = nullptr;
  int max_world_size = 1;
  std::string backend_name;
  // This daemon's name in group.members[].daemon (config peer_advertise);
  // "" = none. Members naming "" or this are local.
  std::string self_daemon;
  // Whether members on other daemons are served (this daemon has a peer
  // client: peer_listen and peer_advertise set). Otherwise they are
  // UNIMPLEMENTED.
  bool peers = false;
  // The other daemons members may name (config peers, from the operator);
  // a member on any other daemon is PERMISSION_DENIED, before anything is
  // dialed.
  std::vector<std::string> allowed_peers;
  // The cache key text of a validated problem of a request on this node
  // (key_text.h, ProblemKeyText), stored in ValidProblem::key_text once
  // the request is whole; null: none stored.
  std::function<std::string(const ValidProblem&, const ValidRequest&)> key_text;
  // The daemon the asking rank must be on: "" = this one; the leader
  // validating a forwarded ask sets the follower's name (ReadyRequest).
  std::string asking_daemon;
};

// Requests (validate.cc): a Tune, or a Sweep size by size, into the
// ValidRequest its round runs (daemon/coordinate/request/valid_request.h). Each
// problem's shape, sizes and candidates are checked by validate_problem.cc.
absl::StatusOr<ValidRequest> ValidateTune(const v1::TuneRequest& request,
                                          const ValidationContext& context);

// A sweep becomes one tune request per count (the problem's count replaced).
// Counts must increase strictly (INVALID_ARGUMENT "counts[i]: ..." otherwise).
// A size that does not fit the memory cap (as ValidateTune would refuse it)
// is no error: it comes back with `skipped` set, so that the sweep measures
// every size that fits and says which it left out.
absl::StatusOr<std::vector<ValidRequest>> ValidateSweep(
    const v1::SweepRequest& request, const ValidationContext& context);

// Groups (validate_group.cc). Validates the group alone (shared by
// ValidateTune and ValidateSweep).
//
// Members: when given, there is one per rank (world_size of them, each rank
// once). Members on this daemon (daemon "" or context.self_daemon) are each on
// a distinct local GPU of this node. Members on other daemons need
// context.peers (else UNIMPLEMENTED), a daemon in context.allowed_peers (else
// PERMISSION_DENIED) and whole_group false; then the asking
// rank must be on context.asking_daemon (this daemon by default), and
// world_size is not bounded by this node (the leader decides what it can
// measure). A group with members and whole_group false is served rank by rank
// and needs a group id. The members' local_gpu is checked and is part of the
// round's identity; the ranks on this daemon run on them (ValidateTune sets
// engine.schedule.devices, which also enters the cache key through
// PlacementText). Without members, rank r runs on GPU r. In a group spread over
// daemons, name every member's daemon: "" means "the daemon asked", which
// differs between daemons, so the leader would see different member lists.
absl::Status ValidateGroup(const v1::Group& group, const ValidationContext& context);

// "world_size=W" and one "rank:local_gpu@daemon" per member, by rank: the
// text every rank of a round must agree on (digested into its round key).
std::string CanonicalMembers(const v1::Group& group);

// Options (validate_options.cc). Validates the options alone (shared by
// ValidateTune and ValidateSweep): each unset one takes the configuration's
// default, each set one is within the configuration's limits.
absl::StatusOr<EngineOptions> ValidateOptions(const v1::Options& options,
                                              const ValidationContext& context);

// Runs of candidates the ranks run (validate_run.cc). The shape of a rank's
// barrier call and report of a run (bounded strings, known phase and
// timing mode, finite non-negative times and host times, steps in order
// from first_step); what depends on the run (its ranks, steps, iterations,
// the schedule's bound on a time) is the run's to check
// (daemon/coordinate/clientrun). INVALID_ARGUMENT naming the field.
absl::Status ValidateStep(const v1::StepRequest& request);
absl::Status ValidateReport(const v1::RunReport& report);

// Enums (enums.cc). A ListImplementations filter: unset (all) or a known
// collective; INVALID_ARGUMENT "collective: ..." otherwise.
absl::Status ValidateListImplementations(const v1::ListImplementationsRequest& request);

}  // namespace autotuned
