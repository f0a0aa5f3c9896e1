#include "daemon/ops/lifecycle/reload.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/text_format.h"

namespace autotuned {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Text format's form of the value (strings quoted and C-escaped), its first
// kMaxShownValueBytes only.
std::string ValueText(const Message& m, const FieldDescriptor* f) {
  std::string out;
  google::protobuf::TextFormat::PrintFieldValueToString(m, f, -1, &out);
  if (out.size() > kMaxShownValueBytes) {
    const size_t full = out.size();
    out.resize(kMaxShownValueBytes);
    absl::StrAppend(&out, "...(", full, " bytes)");
  }
  return out;
}

void Diff(const Message& a, const Message& b, const std::string& prefix,
          ConfigChanges* out) {
  const google::protobuf::Descriptor* d = a.GetDescriptor();
  const Reflection* ra = a.GetReflection();
  const Reflection* rb = b.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string path = prefix + f->name();
    ConfigChange change{path, "", ""};
    if (f->is_repeated()) {
      bool same = ra->FieldSize(a, f) == rb->FieldSize(b, f);
      for (int j = 0; same && j < ra->FieldSize(a, f); ++j) {
        std::string va, vb;
        google::protobuf::TextFormat::PrintFieldValueToString(a, f, j, &va);
        google::protobuf::TextFormat::PrintFieldValueToString(b, f, j, &vb);
        same = va == vb;
      }
      if (same) continue;
      change.before = absl::StrCat(ra->FieldSize(a, f), " entries");
      change.after = absl::StrCat(rb->FieldSize(b, f), " entries");
    } else if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      Diff(ra->GetMessage(a, f), rb->GetMessage(b, f), path + ".", out);
      continue;
    } else {
      change.before = ValueText(a, f);
      change.after = ValueText(b, f);
      if (change.before == change.after) continue;
    }
    (IsLiveField(path) ? out->live : out->need_restart).push_back(std::move(change));
  }
}

}  // namespace

bool IsLiveField(const std::string& field) {
  if (field == "log_level") return true;
  if (field == "limits.max_request_bytes") return false;
  return field.rfind("limits.", 0) == 0 || field.rfind("defaults.", 0) == 0;
}

ConfigChanges DiffConfig(const config::DaemonConfig& before,
                         const config::DaemonConfig& after) {
  ConfigChanges out;
  Diff(before, after, "", &out);
  return out;
}

std::string Describe(const std::vector<ConfigChange>& changes) {
  return absl::StrJoin(changes, ", ", [](std::string* out, const ConfigChange& c) {
    if (c.field == "peer_token") {
      absl::StrAppend(out, c.field, " <redacted>");
    } else {
      absl::StrAppend(out, c.field, " ", c.before, " -> ", c.after);
    }
  });
}

config::DaemonConfig ApplyLive(const config::DaemonConfig& running,
                               const config::DaemonConfig& after) {
  config::DaemonConfig out = running;
  out.set_log_level(after.log_level());
  *out.mutable_limits() = after.limits();
  out.mutable_limits()->set_max_request_bytes(running.limits().max_request_bytes());
  *out.mutable_defaults() = after.defaults();
  return out;
}

}  // namespace autotuned
