#include "config/config_loader.h"

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "config/default_config.h"
#include "common/regular_file.h"
#include "common/status_macros.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace autotuned {
namespace config {
namespace {

constexpr char kEmbeddedName[] = "<embedded config/default.textproto>";

// Collects parser errors as "FILE:LINE:COL: message" (1-based; the protobuf
// tokenizer counts from 0).
class LineErrorCollector : public google::protobuf::io::ErrorCollector {
 public:
  static constexpr size_t kMaxErrors = 8;
  static constexpr size_t kShownErrorBytes = 256;

  explicit LineErrorCollector(std::string file) : file_(std::move(file)) {}

  // At most kMaxErrors, each with control bytes escaped and cut at
  // kShownErrorBytes: the parser may quote the file's text.
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (errors_.size() >= kMaxErrors) return;
    std::string shown;
    for (const char c : message.substr(0, kShownErrorBytes)) {
      const auto u = static_cast<unsigned char>(c);
      if (u < 0x20 || u == 0x7f) {
        absl::StrAppendFormat(&shown, "\\%03o", u);
      } else {
        shown += c;
      }
    }
    if (message.size() > kShownErrorBytes) absl::StrAppend(&shown, "...");
    if (line < 0) {
      errors_.push_back(absl::StrCat(file_, ": ", shown));
    } else {
      errors_.push_back(absl::StrCat(file_, ":", line + 1, ":", column + 1, ": ", shown));
    }
  }

  const std::vector<std::string>& errors() const { return errors_; }

 private:
  const std::string file_;
  std::vector<std::string> errors_;
};

// Parses `text` (named `name` in errors) into a fresh `out`. Unknown fields
// and a non-repeated field given twice are errors.
absl::Status ParseText(const std::string& text, const std::string& name,
                       DaemonConfig* out) {
  LineErrorCollector errors(name);
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  parser.AllowUnknownField(false);
  parser.AllowUnknownExtension(false);
  if (parser.ParseFromString(text, out)) return absl::OkStatus();
  if (errors.errors().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": not a valid DaemonConfig text proto"));
  }
  return absl::InvalidArgumentError(absl::StrJoin(errors.errors(), "\n"));
}

// The regular file at `path` (a symbolic link to one is followed), at most
// kMaxConfigFileBytes long; opened without blocking, so that a FIFO or a
// device put where the file was never stalls a start or a reload. What is
// not a regular file, or too long, is INVALID_ARGUMENT.
absl::StatusOr<std::string> ReadFile(const std::string& path) {
  absl::StatusOr<std::string> text =
      ReadRegularFile(path, kMaxConfigFileBytes, /*follow_links=*/true, "config file ");
  if (!text.ok() && (absl::IsFailedPrecondition(text.status()) ||
                     absl::IsResourceExhausted(text.status()))) {
    return absl::InvalidArgumentError(text.status().message());
  }
  return text;
}

// `value` as text format writes a string (quoted, C-escaped), at most
// kShownBytes of it, then its full size: for error messages.
constexpr size_t kShownBytes = 64;
std::string Quoted(const std::string& value) {
  std::string out =
      absl::StrCat("\"", absl::CEscape(absl::string_view(value).substr(0, kShownBytes)), "\"");
  if (value.size() > kShownBytes) absl::StrAppend(&out, "...(", value.size(), " bytes)");
  return out;
}

// Every string field of `m` (repeated ones included): no control characters
// (bytes below 0x20, 0x7f), at most kMaxConfigStringBytes.
absl::Status CheckStrings(const google::protobuf::Message& m, const std::string& prefix) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  const google::protobuf::Reflection* r = m.GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    const std::string path = prefix + f->name();
    const int n = f->is_repeated() ? r->FieldSize(m, f) : 1;
    for (int j = 0; j < n; ++j) {
      const std::string at = f->is_repeated() ? absl::StrCat(path, "[", j, "]") : path;
      if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        AT_RETURN_IF_ERROR(CheckStrings(
            f->is_repeated() ? r->GetRepeatedMessage(m, f, j) : r->GetMessage(m, f), at + "."));
        continue;
      }
      if (f->cpp_type() != FieldDescriptor::CPPTYPE_STRING) continue;
      const std::string value =
          f->is_repeated() ? r->GetRepeatedString(m, f, j) : r->GetString(m, f);
      for (const char c : value) {
        const auto u = static_cast<unsigned char>(c);
        if (u < 0x20 || u == 0x7f) {
          return absl::InvalidArgumentError(absl::StrCat(
              at, ": must not hold control characters, got ",
              path == "peer_token" ? "<redacted>" : Quoted(value)));
        }
      }
      if (value.size() > kMaxConfigStringBytes) {
        return absl::InvalidArgumentError(absl::StrCat(
            at, ": must be at most ", kMaxConfigStringBytes, " bytes, got ", value.size()));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status OutOfRange(const std::string& field, int64_t lo, int64_t hi,
                        int64_t got) {
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": must be between ", lo, " and ", hi, ", got ", got));
}

absl::Status CheckRange(const std::string& field, int64_t value, int64_t lo,
                        int64_t hi) {
  if (value < lo || value > hi) return OutOfRange(field, lo, hi, value);
  return absl::OkStatus();
}

absl::Status CheckPositive(const std::string& field, int64_t value) {
  if (value <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": must be > 0, got ", value));
  }
  return absl::OkStatus();
}

absl::Status CheckOneOf(const std::string& field, const std::string& value,
                        std::initializer_list<const char*> allowed) {
  for (const char* a : allowed) {
    if (value == a) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(field, ": must be one of ",
                                                 absl::StrJoin(allowed, ", "),
                                                 "; got ", Quoted(value)));
}

// "HOST:PORT" with a port in 0..65535 and a non-empty host ("[v6]" allowed).
absl::Status CheckAddress(const std::string& field, const std::string& value) {
  const size_t colon = value.rfind(':');
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": want HOST:PORT (e.g. \"127.0.0.1:9464\"), got ", Quoted(value), ": ",
        why));
  };
  if (colon == std::string::npos) return bad("no port");
  const std::string host = value.substr(0, colon);
  const std::string port = value.substr(colon + 1);
  if (host.empty()) return bad("no host");
  if (host.front() == '[' && host.back() != ']') return bad("unclosed [");
  if (host.front() != '[' && host.find(':') != std::string::npos) {
    return bad("an IPv6 host goes in brackets");
  }
  if (host.find_first_of("/@?#%\\ ") != std::string::npos) {
    return bad("a host name has no scheme, path or spaces");
  }
  if (host.size() > 255) return bad("a host name has at most 255 characters");
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535) {
    return bad("the port must be a number in 0..65535");
  }
  return absl::OkStatus();
}

// A TlsConfig sets all of its files or none.
absl::Status CheckTlsFiles(const std::string& field, const TlsConfig& t) {
  const bool any = !t.ca_file().empty() || !t.cert_file().empty() || !t.key_file().empty();
  if (!any) return absl::OkStatus();
  for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"ca_file", &t.ca_file()},
                                    {"cert_file", &t.cert_file()},
                                    {"key_file", &t.key_file()}}) {
    if (value->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".", name, ": must be set with the other files of ", field,
          " (ca_file, cert_file and key_file: all three, or none)"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFleetCache(const FleetCacheConfig& f) {
  const TlsConfig& t = f.tls();
  if (!t.cert_file().empty() || !t.key_file().empty()) {
    if (t.ca_file().empty()) {
      return absl::InvalidArgumentError(
          "fleet_cache.tls.ca_file: must be set with fleet_cache.tls.cert_file and key_file");
    }
    AT_RETURN_IF_ERROR(CheckTlsFiles("fleet_cache.tls", t));
  }
  if (f.redis().empty()) return absl::OkStatus();
  if (!t.ca_file().empty() && absl::StartsWith(f.redis(), "unix:")) {
    return absl::InvalidArgumentError(
        "fleet_cache.tls: TLS is for a Redis reached over TCP, not a unix: socket");
  }
  if (absl::StartsWith(f.redis(), "unix:")) {
    if (f.redis().size() < 6 || f.redis()[5] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "fleet_cache.redis: want \"unix:/absolute/path\", got ", Quoted(f.redis())));
    }
  } else {
    AT_RETURN_IF_ERROR(CheckAddress("fleet_cache.redis", f.redis()));
    if (absl::EndsWith(f.redis(), ":0")) {
      return absl::InvalidArgumentError(
          absl::StrCat("fleet_cache.redis: ", Quoted(f.redis()), " names no port"));
    }
  }
  if (f.key_prefix().empty() ||
      f.key_prefix().find_first_of(" \t\r\n:") != std::string::npos) {
    return absl::InvalidArgumentError(
        "fleet_cache.key_prefix: must be non-empty, without spaces or ':'");
  }
  if (!f.user().empty() && f.password_file().empty()) {
    return absl::InvalidArgumentError(
        "fleet_cache.user: needs fleet_cache.password_file (AUTH takes both)");
  }
  AT_RETURN_IF_ERROR(CheckRange("fleet_cache.ttl_s", f.ttl_s(), 1, int64_t{10} * 365 * 86400));
  AT_RETURN_IF_ERROR(
      CheckRange("fleet_cache.connect_timeout_ms", f.connect_timeout_ms(), 1, 60000));
  AT_RETURN_IF_ERROR(
      CheckRange("fleet_cache.command_timeout_ms", f.command_timeout_ms(), 1, 60000));
  return CheckRange("fleet_cache.max_backoff_ms", f.max_backoff_ms(), 1, int64_t{3600} * 1000);
}

}  // namespace

absl::StatusOr<DaemonConfig> ParseConfigText(const std::string& text,
                                             const std::string& name) {
  DaemonConfig config;
  AT_RETURN_IF_ERROR(ParseText(text, name, &config));
  return config;
}

absl::StatusOr<DaemonConfig> DefaultConfig() {
  DaemonConfig config;
  absl::Status s =
      ParseText(std::string(kDefaultConfigText, kDefaultConfigTextSize),
                kEmbeddedName, &config);
  if (!s.ok()) {
    return absl::InternalError(absl::StrCat(
        "the embedded default configuration does not parse: ", s.message()));
  }
  return config;
}

absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path) {
  absl::StatusOr<DaemonConfig> config = DefaultConfig();
  if (!config.ok()) return config.status();
  if (!path.empty()) {
    absl::StatusOr<std::string> text = ReadFile(path);
    if (!text.ok()) return text.status();
    // Parsed on its own first so that a field the file sets twice is caught,
    // then merged: proto2 presence makes MergeFrom copy exactly the fields
    // the file sets (sub-messages field by field, repeated fields appended).
    DaemonConfig user;
    AT_RETURN_IF_ERROR(ParseText(*text, path, &user));
    config->MergeFrom(user);
  }
  AT_RETURN_IF_ERROR(ValidateConfig(*config));
  return config;
}

absl::Status ValidateConfig(const DaemonConfig& c) {
  AT_RETURN_IF_ERROR(CheckStrings(c, ""));
  AT_RETURN_IF_ERROR(
      CheckOneOf("backend", c.backend(), {"auto", "sim", "cuda"}));
  AT_RETURN_IF_ERROR(CheckOneOf("log_level", c.log_level(),
                                {"trace", "debug", "info", "warn", "error"}));
  if (c.unix_socket_mode() > 0777) {
    return absl::InvalidArgumentError(
        absl::StrCat("unix_socket_mode: must be at most 511 (0777), got ",
                     c.unix_socket_mode()));
  }
  if (c.unix_socket().empty() && c.tcp_listen().empty()) {
    return absl::InvalidArgumentError(
        "unix_socket, tcp_listen: both are empty, so no client could "
        "connect; set at least one");
  }

  const SimConfig& sim = c.sim();
  AT_RETURN_IF_ERROR(CheckRange("sim.gpus", sim.gpus(), 1, 1024));
  for (int i = 0; i < sim.faults_size(); ++i) {
    const Fault& f = sim.faults(i);
    const std::string field = absl::StrCat("sim.faults[", i, "]");
    if (f.name().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".name: must not be empty"));
    }
    if (f.base().empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".base: must not be empty"));
    }
    if (f.kind() == Fault::KIND_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, ".kind: must be HANG, FAIL, WRONG_RESULT or SLOW_RANK"));
    }
    if (f.rank() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".rank: must be >= 0, got ", f.rank()));
    }
    AT_RETURN_IF_ERROR(
        CheckRange(absl::StrCat(field, ".delay_us"), f.delay_us(), 0, kMaxDurationMs * 1000));
    if (f.calls() < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".calls: must be >= 0, got ", f.calls()));
    }
  }

  const Limits& l = c.limits();
  AT_RETURN_IF_ERROR(CheckPositive("limits.max_warmup", l.max_warmup()));
  AT_RETURN_IF_ERROR(
      CheckPositive("limits.max_iterations", l.max_iterations()));
  AT_RETURN_IF_ERROR(
      CheckRange("limits.max_timeout_ms", l.max_timeout_ms(), 1, kMaxDurationMs));
  AT_RETURN_IF_ERROR(
      CheckPositive("limits.max_buffer_bytes", l.max_buffer_bytes()));
  if (!(l.gpu_memory_fraction() > 0 && l.gpu_memory_fraction() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "limits.gpu_memory_fraction: must be in (0, 1], got ", l.gpu_memory_fraction()));
  }
  AT_RETURN_IF_ERROR(CheckPositive("limits.max_problems", l.max_problems()));
  AT_RETURN_IF_ERROR(
      CheckPositive("limits.max_candidates", l.max_candidates()));
  AT_RETURN_IF_ERROR(
      CheckPositive("limits.max_sweep_sizes", l.max_sweep_sizes()));
  AT_RETURN_IF_ERROR(CheckRange("limits.max_presync_window_us", l.max_presync_window_us(), 1,
                                kMaxDurationMs * 1000));

  const Defaults& d = c.defaults();
  AT_RETURN_IF_ERROR(
      CheckRange("defaults.warmup", d.warmup(), 0, l.max_warmup()));
  AT_RETURN_IF_ERROR(
      CheckRange("defaults.iterations", d.iterations(), 1, l.max_iterations()));
  AT_RETURN_IF_ERROR(
      CheckRange("defaults.timeout_ms", d.timeout_ms(), 1, l.max_timeout_ms()));
  AT_RETURN_IF_ERROR(CheckRange("defaults.presync_window_us",
                                d.presync_window_us(), 0,
                                l.max_presync_window_us()));
  AT_RETURN_IF_ERROR(CheckOneOf("defaults.timing_mode", d.timing_mode(),
                                {"event_loop", "cuda_graph"}));
  if (!(l.max_min_speedup() >= 0 && l.max_min_speedup() <= 100)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "limits.max_min_speedup: must be in [0, 100], got ", l.max_min_speedup()));
  }
  if (!(d.min_speedup() >= 0 && d.min_speedup() <= l.max_min_speedup())) {
    return absl::InvalidArgumentError(
        absl::StrCat("defaults.min_speedup: must be in [0, limits.max_min_speedup = ",
                     l.max_min_speedup(), "], got ", d.min_speedup()));
  }
  AT_RETURN_IF_ERROR(CheckOneOf("defaults.ranking", d.ranking(), {"interval", "median"}));
  AT_RETURN_IF_ERROR(CheckRange("defaults.max_passes", d.max_passes(), 1, 1000));
  AT_RETURN_IF_ERROR(CheckRange("defaults.min_passes", d.min_passes(), 1, d.max_passes()));
  AT_RETURN_IF_ERROR(CheckRange("defaults.pass_warmup", d.pass_warmup(), 0, l.max_warmup()));
  AT_RETURN_IF_ERROR(
      CheckRange("defaults.pass_iterations", d.pass_iterations(), 1, l.max_iterations()));
  AT_RETURN_IF_ERROR(CheckRange("defaults.max_measured_iterations",
                                d.max_measured_iterations(), 1, 1000000));
  AT_RETURN_IF_ERROR(CheckRange("defaults.pass_budget_ms", d.pass_budget_ms(), 0,
                                l.max_timeout_ms()));

  AT_RETURN_IF_ERROR(CheckRange("limits.max_request_bytes",
                                l.max_request_bytes(), 1024, INT32_MAX));
  AT_RETURN_IF_ERROR(
      CheckPositive("limits.max_concurrent_rounds", l.max_concurrent_rounds()));
  AT_RETURN_IF_ERROR(
      CheckPositive("limits.max_waiting_ranks", l.max_waiting_ranks()));

  AT_RETURN_IF_ERROR(CheckPositive("cache.max_entries", c.cache().max_entries()));
  AT_RETURN_IF_ERROR(CheckPositive("cache.max_bytes", c.cache().max_bytes()));
  if (c.cache().enabled() && c.cache().dir().empty()) {
    return absl::InvalidArgumentError(
        "cache.dir: must not be empty when cache.enabled is true");
  }

  if (!c.metrics_listen().empty()) {
    AT_RETURN_IF_ERROR(CheckAddress("metrics_listen", c.metrics_listen()));
  }
  if (!c.peer_token().empty() && !c.peer_token_file().empty()) {
    return absl::InvalidArgumentError(
        "peer_token, peer_token_file: set at most one of them");
  }
  if (!c.peer_token().empty() && c.peer_token().size() < 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "peer_token: must be at least 16 characters, got ",
        c.peer_token().size()));
  }
  AT_RETURN_IF_ERROR(CheckTlsFiles("peer_tls", c.peer_tls()));
  if (!c.peer_listen().empty()) {
    AT_RETURN_IF_ERROR(CheckAddress("peer_listen", c.peer_listen()));
    if (c.peer_token().empty() && c.peer_token_file().empty() &&
        c.peer_tls().ca_file().empty()) {
      return absl::InvalidArgumentError(
          "peer_listen: the peer port needs a shared token or mutual TLS; set peer_tls "
          "(ca_file, cert_file, key_file), peer_token_file (or peer_token), or leave "
          "peer_listen empty");
    }
  }
  for (int i = 0; i < c.peers_size(); ++i) {
    const std::string field = absl::StrCat("peers[", i, "]");
    AT_RETURN_IF_ERROR(CheckAddress(field, c.peers(i)));
    if (absl::EndsWith(c.peers(i), ":0")) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ": ", Quoted(c.peers(i)), " names no port"));
    }
  }
  AT_RETURN_IF_ERROR(CheckRange("drain_timeout_ms", c.drain_timeout_ms(), 1, kMaxDurationMs));
  AT_RETURN_IF_ERROR(CheckRange("rendezvous.decision_ttl_ms", c.rendezvous().decision_ttl_ms(),
                                1, kMaxDurationMs));
  AT_RETURN_IF_ERROR(CheckRange("cuda.worker_start_timeout_ms",
                                c.cuda().worker_start_timeout_ms(), 1, kMaxDurationMs));
  AT_RETURN_IF_ERROR(CheckRange("rendezvous.max_rounds_kept",
                                c.rendezvous().max_rounds_kept(), 1, 1 << 20));
  AT_RETURN_IF_ERROR(
      CheckPositive("rendezvous.max_kept_bytes", c.rendezvous().max_kept_bytes()));
  AT_RETURN_IF_ERROR(CheckRange("rendezvous.resync_after_missed_rounds",
                                c.rendezvous().resync_after_missed_rounds(), 1, 1 << 20));
  return CheckFleetCache(c.fleet_cache());
}

}  // namespace config
}  // namespace autotuned
