// Groups: ValidateGroup and CanonicalMembers of validate.h.
#include "daemon/coordinate/request/validate.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/common/escape.h"
#include "common/status_macros.h"
#include "daemon/coordinate/request/checks.h"

namespace autotuned {
namespace {

using request_internal::CheckString;
using request_internal::Invalid;

// Which member (index in group.members) holds each rank and each local GPU
// so far; -1: none.
struct MemberIndex {
  std::vector<int> of_rank;
  std::vector<int> of_gpu;
};

// group.members[i]: its rank, its daemon, and (on this daemon) its GPU.
absl::Status ValidateMember(const v1::Group& g, int i, const ValidationContext& ctx,
                            MemberIndex* index) {
  const v1::Member& m = g.members(i);
  const std::string f = absl::StrCat("group.members[", i, "]");
  if (m.rank() < 0 || m.rank() >= g.world_size()) {
    return Invalid(f + ".rank", absl::StrCat("must be in [0, ", g.world_size(),
                                             "), got ", m.rank()));
  }
  if (index->of_rank[m.rank()] >= 0) {
    return Invalid(f + ".rank", absl::StrCat("rank ", m.rank(), " is listed twice (also members[",
                                             index->of_rank[m.rank()], "])"));
  }
  index->of_rank[m.rank()] = i;
  AT_RETURN_IF_ERROR(CheckString(f + ".daemon", m.daemon(), kMaxDaemonBytes, true));
  if (!m.daemon().empty() && m.daemon() != ctx.self_daemon) {
    if (!ctx.peers || g.whole_group()) {
      return absl::UnimplementedError(absl::StrCat(
          f, ".daemon: \"", m.daemon(), "\" is another daemon (this one is ",
          ctx.self_daemon.empty() ? std::string("unnamed: peer_advertise is empty")
                                  : absl::StrCat("\"", ctx.self_daemon, "\""),
          "); groups spread over several daemons need ranks asking one by one "
          "(whole_group false) and this daemon's peer_listen and peer_advertise"));
    }
    if (std::find(ctx.allowed_peers.begin(), ctx.allowed_peers.end(), m.daemon()) ==
        ctx.allowed_peers.end()) {
      return absl::PermissionDeniedError(absl::StrCat(
          f, ".daemon: \"", LogEscaped(m.daemon()), "\" is not one of this daemon's peers ",
          ctx.allowed_peers.empty() ? std::string("(none configured: groups spread over daemons "
                                                  "need the configuration's peers)")
                                    : std::string("(the configuration's peers)")));
    }
    if (m.rank() == g.rank() && m.daemon() != ctx.asking_daemon) {
      return Invalid("group.rank",
                     absl::StrCat("rank ", g.rank(), " is on daemon \"", m.daemon(),
                                  "\" (", f, "); ask that daemon"));
    }
    return absl::OkStatus();  // its local_gpu is its own daemon's to check
  }
  if (m.rank() == g.rank() && !ctx.asking_daemon.empty()) {
    return Invalid("group.rank",
                   absl::StrCat("rank ", g.rank(), " is on this daemon (", f,
                                "), not on \"", ctx.asking_daemon, "\""));
  }
  if (m.local_gpu() < 0 || m.local_gpu() >= ctx.max_world_size) {
    return Invalid(f + ".local_gpu",
                   absl::StrCat("must be in [0, ", ctx.max_world_size, ") on this ",
                                ctx.backend_name, " node, got ", m.local_gpu()));
  }
  if (index->of_gpu[m.local_gpu()] >= 0) {
    return Invalid(f + ".local_gpu",
                   absl::StrCat("GPU ", m.local_gpu(), " is listed twice (also members[",
                                index->of_gpu[m.local_gpu()], "])"));
  }
  index->of_gpu[m.local_gpu()] = i;
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateGroup(const v1::Group& g, const ValidationContext& ctx) {
  AT_RETURN_IF_ERROR(CheckString("group.id", g.id(), kMaxGroupIdBytes, true));
  if (g.world_size() <= 0) {
    return Invalid("group.world_size",
                   absl::StrCat("must be positive, got ", g.world_size()));
  }
  bool remote = false;  // members on other daemons
  for (const v1::Member& m : g.members()) {
    remote = remote || (!m.daemon().empty() && m.daemon() != ctx.self_daemon);
  }
  if (!remote && g.world_size() > ctx.max_world_size) {
    return Invalid("group.world_size",
                   absl::StrCat(g.world_size(), " ranks, but the ",
                                ctx.backend_name, " backend serves at most ",
                                ctx.max_world_size, " on this node"));
  }
  if (g.rank() < 0 || g.rank() >= g.world_size()) {
    return Invalid("group.rank", absl::StrCat("must be in [0, ", g.world_size(),
                                              "), got ", g.rank()));
  }
  if (g.members_size() == 0) return absl::OkStatus();
  if (g.members_size() != g.world_size()) {
    return Invalid("group.members",
                   absl::StrCat(g.members_size(), " members for world_size ",
                                g.world_size(), "; list every rank once"));
  }
  MemberIndex index{std::vector<int>(g.world_size(), -1),
                    std::vector<int>(ctx.max_world_size, -1)};
  for (int i = 0; i < g.members_size(); ++i) {
    AT_RETURN_IF_ERROR(ValidateMember(g, i, ctx, &index));
  }
  if (!g.whole_group()) {
    if (g.id().empty()) {
      return Invalid("group.id", "is required when ranks ask one by one (members "
                                 "given, whole_group false)");
    }
  }
  return absl::OkStatus();
}

std::string CanonicalMembers(const v1::Group& g) {
  std::vector<const v1::Member*> by_rank;
  for (const v1::Member& m : g.members()) by_rank.push_back(&m);
  std::sort(by_rank.begin(), by_rank.end(),
            [](const v1::Member* a, const v1::Member* b) { return a->rank() < b->rank(); });
  std::string out = absl::StrCat("world_size=", g.world_size());
  for (const v1::Member* m : by_rank) {
    absl::StrAppend(&out, "\n", m->rank(), ":", m->local_gpu(), "@", m->daemon().size(),
                    ":", m->daemon());
  }
  return out;
}

}  // namespace autotuned
