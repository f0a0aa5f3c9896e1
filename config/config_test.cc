#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "config/config_loader.h"
#include "config/default_config.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"

namespace autotuned {
namespace config {
namespace {

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = TempPath(name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

DaemonConfig Default() {
  absl::StatusOr<DaemonConfig> c = LoadConfig("");
  REQUIRE(c.ok());
  return *c;
}

// ValidateConfig's message for `c` after `change`; "" when it validates.
std::string Reject(const std::function<void(DaemonConfig*)>& change) {
  DaemonConfig c = Default();
  change(&c);
  absl::Status s = ValidateConfig(c);
  if (s.ok()) return "";
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  return std::string(s.message());
}

TEST_CASE("the embedded default parses, validates and is default.textproto") {
  absl::StatusOr<DaemonConfig> c = LoadConfig("");
  REQUIRE(c.ok());
  CHECK(ValidateConfig(*c).ok());

  const std::string file = ReadAll("config/default.textproto");
  REQUIRE_FALSE(file.empty());
  CHECK(std::string(kDefaultConfigText, kDefaultConfigTextSize) == file);
  DaemonConfig from_file;
  REQUIRE(google::protobuf::TextFormat::ParseFromString(file, &from_file));
  CHECK(google::protobuf::util::MessageDifferencer::Equals(*c, from_file));

  // The documented values of the schema.
  CHECK(c->unix_socket() == "/run/autotuned/autotuned.sock");
  CHECK(c->unix_socket_mode() == 0660);
  CHECK(c->tcp_listen().empty());
  CHECK(c->backend() == "auto");
  CHECK(c->log_level() == "info");
  CHECK(c->sim().gpus() == 4);
  CHECK(c->sim().faults_size() == 0);
  CHECK(c->limits().max_warmup() == 1000);
  CHECK(c->limits().max_iterations() == 10000);
  CHECK(c->limits().max_timeout_ms() == 600000);
  CHECK(c->limits().max_buffer_bytes() == (int64_t{32} << 30));
  CHECK(c->limits().gpu_memory_fraction() == 0.5);
  CHECK(c->limits().max_problems() == 256);
  CHECK(c->limits().max_candidates() == 32);
  CHECK(c->limits().max_sweep_sizes() == 64);
  CHECK(c->limits().max_presync_window_us() == 10000000);
  CHECK(c->defaults().warmup() == 5);
  CHECK(c->defaults().iterations() == 20);
  CHECK(c->defaults().timeout_ms() == 10000);
  CHECK(c->defaults().timing_mode() == "event_loop");
  CHECK(c->defaults().presync_window_us() == 5000);
  CHECK(c->limits().max_request_bytes() == 4 << 20);
  CHECK(c->limits().max_concurrent_rounds() == 64);
  CHECK(c->cache().enabled());
  CHECK(c->cache().dir() == "/var/lib/autotuned/cache");
  CHECK(c->metrics_listen().empty());
  CHECK(c->peer_listen().empty());
  CHECK(c->peer_token().empty());
  CHECK(c->peer_token_file().empty());
  CHECK(c->drain_timeout_ms() == 60000);
  CHECK(c->peer_advertise().empty());
  CHECK(c->rendezvous().decision_ttl_ms() == 600000);
  CHECK(c->rendezvous().max_rounds_kept() == 4096);
  CHECK(c->rendezvous().measure_after_fallback());

  // Every field is spelled out: the file agrees with the proto defaults.
  DaemonConfig schema_defaults;
  schema_defaults.mutable_sim();
  schema_defaults.mutable_limits();
  schema_defaults.mutable_defaults();
  schema_defaults.mutable_cache();
  google::protobuf::util::MessageDifferencer diff;
  diff.set_message_field_comparison(
      google::protobuf::util::MessageDifferencer::EQUIVALENT);
  CHECK(diff.Compare(*c, schema_defaults));
}

TEST_CASE("a user file merges over the default") {
  const std::string path = WriteTemp("user.textproto",
                                     "# mine\n"
                                     "backend: \"sim\"\n"
                                     "sim { gpus: 8 }\n"
                                     "limits { max_problems: 7 }\n"
                                     "cache { dir: \"/tmp/c\" }\n");
  absl::StatusOr<DaemonConfig> got = LoadConfig(path);
  REQUIRE(got.ok());

  DaemonConfig want = Default();
  want.set_backend("sim");
  want.mutable_sim()->set_gpus(8);
  want.mutable_limits()->set_max_problems(7);
  want.mutable_cache()->set_dir("/tmp/c");
  CHECK(google::protobuf::util::MessageDifferencer::Equals(*got, want));
  CHECK(got->limits().max_candidates() == 32);
  CHECK(got->cache().enabled());
}

TEST_CASE("an older file's memory cap keeps loading, now as the per-GPU ceiling") {
  absl::StatusOr<DaemonConfig> got = LoadConfig(
      WriteTemp("old.textproto", "limits { max_buffer_bytes: 1073741824 }\n"));
  REQUIRE(got.ok());
  CHECK(got->limits().max_buffer_bytes() == (int64_t{1} << 30));
  CHECK(got->limits().gpu_memory_fraction() == Default().limits().gpu_memory_fraction());
}

TEST_CASE("an empty user file gives the default") {
  absl::StatusOr<DaemonConfig> got =
      LoadConfig(WriteTemp("empty.textproto", ""));
  REQUIRE(got.ok());
  CHECK(google::protobuf::util::MessageDifferencer::Equals(*got, Default()));
}

TEST_CASE("a user file may turn a string off and add faults") {
  const std::string path = WriteTemp("faults.textproto",
                                     "tcp_listen: \"127.0.0.1:7450\"\n"
                                     "unix_socket: \"\"\n"
                                     "sim {\n"
                                     "  faults { name: \"all_reduce/hangs\" "
                                     "base: \"all_reduce/ring\" kind: HANG }\n"
                                     "}\n");
  absl::StatusOr<DaemonConfig> got = LoadConfig(path);
  REQUIRE(got.ok());
  CHECK(got->unix_socket().empty());
  CHECK(got->tcp_listen() == "127.0.0.1:7450");
  REQUIRE(got->sim().faults_size() == 1);
  CHECK(got->sim().faults(0).kind() == Fault::HANG);
  CHECK(got->sim().gpus() == 4);
}

TEST_CASE("a syntax error names the file, line and column") {
  const std::string path = WriteTemp("bad.textproto",
                                     "backend: \"sim\"\n"
                                     "sim {\n"
                                     "  gpus: : 3\n"
                                     "}\n");
  absl::StatusOr<DaemonConfig> got = LoadConfig(path);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
  const std::string msg(got.status().message());
  CHECK_THAT(msg, Catch::StartsWith(path + ":3:"));
  CHECK_THAT(msg, Catch::Contains(path + ":3:9: "));
}

TEST_CASE("an unknown field is an error that names it") {
  const std::string path =
      WriteTemp("unknown.textproto", "sim {\n  gpus: 2\n  gpu_count: 3\n}\n");
  absl::StatusOr<DaemonConfig> got = LoadConfig(path);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(got.status().message()),
             Catch::Contains("gpu_count") && Catch::Contains(path + ":3:"));
}

TEST_CASE("a field set twice in the user file is an error") {
  const std::string path =
      WriteTemp("twice.textproto", "backend: \"sim\"\nbackend: \"cuda\"\n");
  absl::StatusOr<DaemonConfig> got = LoadConfig(path);
  REQUIRE_FALSE(got.ok());
  CHECK_THAT(std::string(got.status().message()),
             Catch::Contains(path + ":2:") && Catch::Contains("backend"));
}

TEST_CASE("a value that fails validation names the field") {
  const std::string path = WriteTemp("zero.textproto", "sim { gpus: 0 }\n");
  absl::StatusOr<DaemonConfig> got = LoadConfig(path);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(got.status().message() ==
        "sim.gpus: must be between 1 and 1024, got 0");
}

TEST_CASE("a missing file is an error naming the path") {
  const std::string path = TempPath("does/not/exist.textproto");
  absl::StatusOr<DaemonConfig> got = LoadConfig(path);
  REQUIRE_FALSE(got.ok());
  CHECK(got.status().code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(got.status().message()), Catch::Contains(path));
}

TEST_CASE("a directory is not a readable config file") {
  const std::string path = TempPath("");
  absl::StatusOr<DaemonConfig> got = LoadConfig(path);
  REQUIRE_FALSE(got.ok());
  CHECK_THAT(std::string(got.status().message()), Catch::Contains(path));
}

TEST_CASE("each validation rule rejects with the field name") {
  CHECK(Reject([](DaemonConfig*) {}).empty());

  CHECK_THAT(Reject([](DaemonConfig* c) { c->set_backend("gpu"); }),
             Catch::StartsWith("backend: ") && Catch::Contains("\"gpu\""));
  for (const char* ok : {"auto", "sim", "cuda"}) {
    CHECK(Reject([&](DaemonConfig* c) { c->set_backend(ok); }).empty());
  }
  CHECK_THAT(Reject([](DaemonConfig* c) { c->set_log_level("verbose"); }),
             Catch::StartsWith("log_level: "));
  for (const char* ok : {"trace", "debug", "info", "warn", "error"}) {
    CHECK(Reject([&](DaemonConfig* c) { c->set_log_level(ok); }).empty());
  }
  CHECK_THAT(Reject([](DaemonConfig* c) { c->set_unix_socket_mode(01000); }),
             Catch::StartsWith("unix_socket_mode: "));
  CHECK(Reject([](DaemonConfig* c) { c->set_unix_socket_mode(0777); }).empty());
  CHECK_THAT(Reject([](DaemonConfig* c) { c->set_unix_socket(""); }),
             Catch::Contains("unix_socket") && Catch::Contains("tcp_listen"));
  CHECK(Reject([](DaemonConfig* c) {
          c->set_unix_socket("");
          c->set_tcp_listen("127.0.0.1:7450");
        }).empty());

  for (double bad : {0.0, -0.5, 1.5}) {
    CHECK_THAT(Reject([&](DaemonConfig* c) {
                 c->mutable_limits()->set_gpu_memory_fraction(bad);
               }),
               Catch::StartsWith("limits.gpu_memory_fraction: must be in (0, 1]"));
  }
  CHECK(Reject([](DaemonConfig* c) {
          c->mutable_limits()->set_gpu_memory_fraction(1.0);
        }).empty());
  CHECK(Reject([](DaemonConfig* c) { c->mutable_sim()->set_gpus(0); }) ==
        "sim.gpus: must be between 1 and 1024, got 0");
  CHECK_THAT(Reject([](DaemonConfig* c) { c->mutable_sim()->set_gpus(1025); }),
             Catch::StartsWith("sim.gpus: "));
  CHECK(Reject([](DaemonConfig* c) {
          c->mutable_sim()->set_gpus(1024);
        }).empty());
  CHECK(Reject([](DaemonConfig* c) { c->mutable_sim()->set_gpus(1); }).empty());

  auto fault = [](DaemonConfig* c) {
    Fault* f = c->mutable_sim()->add_faults();
    f->set_name("all_reduce/fails");
    f->set_base("all_reduce/ring");
    f->set_kind(Fault::FAIL);
    return f;
  };
  CHECK(Reject([&](DaemonConfig* c) { fault(c); }).empty());
  CHECK_THAT(Reject([&](DaemonConfig* c) { fault(c)->clear_name(); }),
             Catch::StartsWith("sim.faults[0].name: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) { fault(c)->clear_base(); }),
             Catch::StartsWith("sim.faults[0].base: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) {
               fault(c);
               fault(c)->clear_kind();
             }),
             Catch::StartsWith("sim.faults[1].kind: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) { fault(c)->set_rank(-1); }),
             Catch::StartsWith("sim.faults[0].rank: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) { fault(c)->set_delay_us(-1); }),
             Catch::StartsWith("sim.faults[0].delay_us: "));

  // Every limit must be positive (max_min_speedup: not negative).
  const google::protobuf::Descriptor* limits = Limits::descriptor();
  for (int i = 0; i < limits->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* field = limits->field(i);
    for (int64_t bad : {int64_t{0}, int64_t{-1}}) {
      DaemonConfig c = Default();
      const google::protobuf::Reflection* r = c.limits().GetReflection();
      Limits* l = c.mutable_limits();
      if (field->cpp_type() == google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE) {
        if (bad == 0) continue;
        r->SetDouble(l, field, static_cast<double>(bad));
      } else if (field->cpp_type() ==
          google::protobuf::FieldDescriptor::CPPTYPE_INT32) {
        r->SetInt32(l, field, static_cast<int32_t>(bad));
      } else {
        REQUIRE(field->cpp_type() ==
                google::protobuf::FieldDescriptor::CPPTYPE_INT64);
        r->SetInt64(l, field, bad);
      }
      absl::Status s = ValidateConfig(c);
      INFO(field->name());
      REQUIRE_FALSE(s.ok());
      CHECK_THAT(std::string(s.message()),
                 Catch::StartsWith("limits." + field->name() + ": "));
    }
  }

  // Defaults must lie inside the limits.
  auto defaults = [](DaemonConfig* c) { return c->mutable_defaults(); };
  CHECK_THAT(Reject([&](DaemonConfig* c) { defaults(c)->set_warmup(-1); }),
             Catch::StartsWith("defaults.warmup: "));
  CHECK(Reject([&](DaemonConfig* c) { defaults(c)->set_warmup(0); }).empty());
  CHECK(
      Reject([&](DaemonConfig* c) { defaults(c)->set_warmup(1000); }).empty());
  CHECK(Reject([&](DaemonConfig* c) { defaults(c)->set_warmup(1001); }) ==
        "defaults.warmup: must be between 0 and 1000, got 1001");
  CHECK_THAT(
      Reject([&](DaemonConfig* c) { c->mutable_limits()->set_max_warmup(3); }),
      Catch::StartsWith("defaults.warmup: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) { defaults(c)->set_min_speedup(-0.1); }),
             Catch::StartsWith("defaults.min_speedup: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) { c->mutable_limits()->set_max_min_speedup(0.001); }),
             Catch::StartsWith("defaults.min_speedup: "));
  CHECK(Reject([&](DaemonConfig* c) { defaults(c)->set_min_speedup(0); }).empty());
  CHECK_THAT(Reject([&](DaemonConfig* c) { defaults(c)->set_max_passes(0); }),
             Catch::StartsWith("defaults.max_passes: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) { defaults(c)->set_max_passes(1); }),
             Catch::StartsWith("defaults.min_passes: "));
  CHECK(Reject([&](DaemonConfig* c) {
          defaults(c)->set_max_passes(1);
          defaults(c)->set_min_passes(1);
        }).empty());
  CHECK_THAT(Reject([&](DaemonConfig* c) { defaults(c)->set_pass_iterations(0); }),
             Catch::StartsWith("defaults.pass_iterations: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) { defaults(c)->set_pass_budget_ms(-1); }),
             Catch::StartsWith("defaults.pass_budget_ms: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) { defaults(c)->set_iterations(0); }),
             Catch::StartsWith("defaults.iterations: "));
  CHECK_THAT(
      Reject([&](DaemonConfig* c) { defaults(c)->set_iterations(10001); }),
      Catch::StartsWith("defaults.iterations: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) { defaults(c)->set_timeout_ms(0); }),
             Catch::StartsWith("defaults.timeout_ms: "));
  CHECK_THAT(
      Reject([&](DaemonConfig* c) { defaults(c)->set_timeout_ms(600001); }),
      Catch::StartsWith("defaults.timeout_ms: "));
  CHECK_THAT(
      Reject([&](DaemonConfig* c) { defaults(c)->set_presync_window_us(-1); }),
      Catch::StartsWith("defaults.presync_window_us: "));
  CHECK_THAT(Reject([&](DaemonConfig* c) {
               defaults(c)->set_presync_window_us(10000001);
             }),
             Catch::StartsWith("defaults.presync_window_us: "));
  CHECK(Reject([&](DaemonConfig* c) {
          defaults(c)->set_presync_window_us(0);
        }).empty());
  CHECK_THAT(
      Reject([&](DaemonConfig* c) { defaults(c)->set_timing_mode("x"); }),
      Catch::StartsWith("defaults.timing_mode: "));
  CHECK(Reject([&](DaemonConfig* c) {
          defaults(c)->set_timing_mode("cuda_graph");
        }).empty());

  CHECK_THAT(Reject([](DaemonConfig* c) { c->mutable_cache()->set_dir(""); }),
             Catch::StartsWith("cache.dir: "));
  CHECK(Reject([](DaemonConfig* c) {
          c->mutable_cache()->set_dir("");
          c->mutable_cache()->set_enabled(false);
        }).empty());

  CHECK_THAT(Reject([](DaemonConfig* c) {
               c->mutable_limits()->set_max_request_bytes(1023);
             }),
             Catch::StartsWith("limits.max_request_bytes: "));
  CHECK_THAT(Reject([](DaemonConfig* c) { c->set_drain_timeout_ms(0); }),
             Catch::StartsWith("drain_timeout_ms: "));
  CHECK_THAT(Reject([](DaemonConfig* c) {
               c->mutable_rendezvous()->set_decision_ttl_ms(0);
             }),
             Catch::StartsWith("rendezvous.decision_ttl_ms: "));
  CHECK_THAT(Reject([](DaemonConfig* c) {
               c->mutable_rendezvous()->set_max_rounds_kept(0);
             }),
             Catch::StartsWith("rendezvous.max_rounds_kept: "));
}

TEST_CASE("listen addresses and the peer token are checked") {
  for (const char* ok : {"127.0.0.1:9464", "localhost:0", "[::1]:9464",
                         "0.0.0.0:65535"}) {
    INFO(ok);
    CHECK(Reject([&](DaemonConfig* c) { c->set_metrics_listen(ok); }).empty());
  }
  for (const char* bad : {"9464", ":9464", "127.0.0.1:", "127.0.0.1:65536",
                          "127.0.0.1:http", "::1:9464", "[::1:9464"}) {
    INFO(bad);
    CHECK_THAT(Reject([&](DaemonConfig* c) { c->set_metrics_listen(bad); }),
               Catch::StartsWith("metrics_listen: want HOST:PORT"));
  }

  CHECK(Reject([](DaemonConfig* c) { c->set_peer_listen("0.0.0.0:7451"); }) ==
        "peer_listen: the peer port needs a shared token or mutual TLS; set peer_tls "
        "(ca_file, cert_file, key_file), peer_token_file (or peer_token), or leave "
        "peer_listen empty");
  auto tls = [](DaemonConfig* c) {
    c->mutable_peer_tls()->set_ca_file("/etc/autotuned/ca.pem");
    c->mutable_peer_tls()->set_cert_file("/etc/autotuned/node.pem");
    c->mutable_peer_tls()->set_key_file("/etc/autotuned/node.key");
  };
  CHECK(Reject([&](DaemonConfig* c) {
          c->set_peer_listen("0.0.0.0:7451");
          tls(c);
        }).empty());
  CHECK(Reject([&](DaemonConfig* c) {
          c->set_peer_listen("0.0.0.0:7451");
          c->set_peer_token("0123456789abcdef");
          tls(c);
        }).empty());
  CHECK_THAT(Reject([&](DaemonConfig* c) {
               tls(c);
               c->mutable_peer_tls()->clear_cert_file();
             }),
             Catch::StartsWith("peer_tls.cert_file: must be set with the other files"));
  CHECK_THAT(Reject([&](DaemonConfig* c) {
               tls(c);
               c->mutable_peer_tls()->set_key_file("");
             }),
             Catch::StartsWith("peer_tls.key_file: must be set with the other files"));
  CHECK_THAT(Reject([&](DaemonConfig* c) {
               c->set_peer_listen("0.0.0.0:7451");
               c->mutable_peer_tls()->set_ca_file("/etc/autotuned/ca.pem");
             }),
             Catch::StartsWith("peer_tls.cert_file: must be set with the other files"));
  CHECK(Reject([](DaemonConfig* c) {
          c->set_peer_listen("0.0.0.0:7451");
          c->set_peer_token_file("/etc/autotuned/peer.token");
        }).empty());
  CHECK(Reject([](DaemonConfig* c) {
          c->set_peer_listen("0.0.0.0:7451");
          c->set_peer_token("0123456789abcdef");
        }).empty());
  CHECK_THAT(Reject([](DaemonConfig* c) { c->set_peer_token("short"); }),
             Catch::StartsWith("peer_token: must be at least 16 characters"));
  CHECK_THAT(Reject([](DaemonConfig* c) {
               c->set_peer_token("0123456789abcdef");
               c->set_peer_token_file("/etc/autotuned/peer.token");
             }),
             Catch::StartsWith("peer_token, peer_token_file: "));
  CHECK_THAT(Reject([](DaemonConfig* c) {
               c->set_peer_listen("7451");
               c->set_peer_token("0123456789abcdef");
             }),
             Catch::StartsWith("peer_listen: want HOST:PORT"));
}

TEST_CASE("peers are host:port addresses, never another scheme") {
  CHECK(Reject([](DaemonConfig* c) {
          c->add_peers("node7:7451");
          c->add_peers("[fe80::1]:7451");
        }).empty());
  for (const char* bad : {"unix:/run/autotuned/autotuned.sock", "unix:///tmp/x:1",
                          "dns:///node7:7451", "ipv4:10.0.0.1:7451", "node7",
                          "a/b:7451", "user@node7:7451", "node7:0"}) {
    INFO(bad);
    CHECK_THAT(Reject([&](DaemonConfig* c) {
                 c->add_peers("node6:7451");
                 c->add_peers(bad);
               }),
               Catch::StartsWith("peers[1]: "));
  }
}

TEST_CASE("the fleet cache's fields are checked when it is on") {
  auto fleet = [](const std::function<void(FleetCacheConfig*)>& change) {
    return Reject([&](DaemonConfig* c) {
      c->mutable_fleet_cache()->set_redis("redis.internal:6379");
      change(c->mutable_fleet_cache());
    });
  };
  CHECK(fleet([](FleetCacheConfig*) {}).empty());
  CHECK(fleet([](FleetCacheConfig* f) { f->set_redis("unix:/run/redis/redis.sock"); }).empty());
  CHECK(fleet([](FleetCacheConfig* f) {
          f->set_user("fleet");
          f->set_password_file("/etc/autotuned/redis.password");
        }).empty());
  // Off: nothing else is looked at.
  CHECK(Reject([](DaemonConfig* c) { c->mutable_fleet_cache()->set_ttl_s(0); }).empty());
  CHECK(fleet([](FleetCacheConfig* f) { f->mutable_tls()->set_ca_file("/etc/ca.pem"); }).empty());
  CHECK(fleet([](FleetCacheConfig* f) {
          f->mutable_tls()->set_ca_file("/etc/ca.pem");
          f->mutable_tls()->set_cert_file("/etc/node.pem");
          f->mutable_tls()->set_key_file("/etc/node.key");
        }).empty());
  CHECK_THAT(fleet([](FleetCacheConfig* f) {
               f->mutable_tls()->set_ca_file("/etc/ca.pem");
               f->mutable_tls()->set_cert_file("/etc/node.pem");
             }),
             Catch::StartsWith("fleet_cache.tls.key_file: must be set with the other files"));
  CHECK_THAT(fleet([](FleetCacheConfig* f) {
               f->mutable_tls()->set_cert_file("/etc/node.pem");
               f->mutable_tls()->set_key_file("/etc/node.key");
             }),
             Catch::StartsWith("fleet_cache.tls.ca_file: must be set"));
  CHECK_THAT(fleet([](FleetCacheConfig* f) {
               f->set_redis("unix:/run/redis.sock");
               f->mutable_tls()->set_ca_file("/etc/ca.pem");
             }),
             Catch::StartsWith("fleet_cache.tls: TLS is for a Redis reached over TCP"));

  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_redis("redis.internal"); }),
             Catch::StartsWith("fleet_cache.redis: want HOST:PORT"));
  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_redis("redis.internal:0"); }),
             Catch::StartsWith("fleet_cache.redis: \"redis.internal:0\" names no port"));
  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_redis("unix:relative.sock"); }),
             Catch::StartsWith("fleet_cache.redis: want \"unix:/absolute/path\""));
  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_key_prefix("a:b"); }),
             Catch::StartsWith("fleet_cache.key_prefix: "));
  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_key_prefix(""); }),
             Catch::StartsWith("fleet_cache.key_prefix: "));
  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_user("fleet"); }),
             Catch::StartsWith("fleet_cache.user: needs fleet_cache.password_file"));
  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_ttl_s(0); }),
             Catch::StartsWith("fleet_cache.ttl_s: "));
  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_connect_timeout_ms(0); }),
             Catch::StartsWith("fleet_cache.connect_timeout_ms: "));
  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_command_timeout_ms(60001); }),
             Catch::StartsWith("fleet_cache.command_timeout_ms: "));
  CHECK_THAT(fleet([](FleetCacheConfig* f) { f->set_max_backoff_ms(0); }),
             Catch::StartsWith("fleet_cache.max_backoff_ms: "));
}

TEST_CASE("ParseConfigText parses text alone, naming errors after `name`") {
  absl::StatusOr<DaemonConfig> c = ParseConfigText("sim { gpus: 2 }", "t");
  REQUIRE(c.ok());
  CHECK(c->sim().gpus() == 2);
  CHECK_FALSE(c->has_log_level());
  absl::StatusOr<DaemonConfig> bad = ParseConfigText("sim {\n gpus: x }", "t");
  REQUIRE_FALSE(bad.ok());
  CHECK_THAT(std::string(bad.status().message()), Catch::StartsWith("t:2:"));
}


// Every numeric leaf field of `m` (repeated fields and their messages aside),
// by its path, e.g. "limits.max_iterations".
void NumericFields(const google::protobuf::Message& m, const std::string& prefix,
                   std::vector<std::string>* out) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    const std::string path = prefix + f->name();
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        NumericFields(m.GetReflection()->GetMessage(m, f), path + ".", out);
        break;
      case FieldDescriptor::CPPTYPE_INT32:
      case FieldDescriptor::CPPTYPE_INT64:
      case FieldDescriptor::CPPTYPE_UINT32:
      case FieldDescriptor::CPPTYPE_UINT64:
      case FieldDescriptor::CPPTYPE_DOUBLE:
        out->push_back(path);
        break;
      default:
        break;
    }
  }
}

// `path: value` in text format, e.g. "limits { max_iterations: 5 }".
std::string FieldText(const std::string& path, const std::string& value) {
  std::string text;
  size_t start = 0;
  int depth = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1) {
    text += path.substr(start, dot - start) + " { ";
    ++depth;
  }
  text += path.substr(start) + ": " + value;
  for (int i = 0; i < depth; ++i) text += " }";
  return text;
}

class SilentErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
};

// Merges `path: value` into `c`; false when the field's type cannot hold it.
bool SetField(DaemonConfig* c, const std::string& path, const std::string& value) {
  SilentErrors silent;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&silent);
  DaemonConfig change;
  if (!parser.ParseFromString(FieldText(path, value), &change)) return false;
  c->MergeFrom(change);
  return true;
}

TEST_CASE("every numeric field at 0, -1 and its type's extremes: valid, or refused naming it") {
  DaemonConfig base = Default();
  base.mutable_fleet_cache()->set_redis("127.0.0.1:6379");  // its fields are checked too
  REQUIRE(ValidateConfig(base).ok());
  std::vector<std::string> fields;
  NumericFields(base, "", &fields);
  REQUIRE(fields.size() > 30);
  int refused = 0;
  for (const std::string& field : fields) {
    for (const char* value : {"0", "-1", "2147483647", "-2147483648", "4294967295",
                              "9223372036854775807", "-9223372036854775808", "1e308",
                              "-1e308", "nan", "inf"}) {
      DaemonConfig c = base;
      if (!SetField(&c, field, value)) continue;  // the type cannot hold it
      const absl::Status s = ValidateConfig(c);
      INFO(field << ": " << value << " -> " << s.ToString());
      if (s.ok()) continue;
      ++refused;
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(s.message()), Catch::Contains(field));
    }
  }
  CHECK(refused > 0);
}

TEST_CASE("a duration beyond a day is refused naming the field, as is one not positive") {
  // Every duration field whose own rule is "> 0" or unchecked; those with a
  // range of their own (fleet_cache.*, defaults.* within limits.*) are above.
  for (const char* field :
       {"drain_timeout_ms", "rendezvous.decision_ttl_ms", "cuda.worker_start_timeout_ms",
        "limits.max_timeout_ms"}) {
    for (const std::string& value :
         {std::string("0"), std::string("-1"), std::to_string(kMaxDurationMs + 1),
          std::string("9223372036854775807")}) {
      DaemonConfig c = Default();
      REQUIRE(SetField(&c, field, value));
      INFO(field << ": " << value);
      const absl::Status s = ValidateConfig(c);
      CHECK(s.code() == absl::StatusCode::kInvalidArgument);
      CHECK_THAT(std::string(s.message()), Catch::StartsWith(std::string(field) + ": "));
    }
    DaemonConfig c = Default();
    REQUIRE(SetField(&c, field, std::to_string(kMaxDurationMs)));
    if (std::string(field) == "limits.max_timeout_ms") c.mutable_defaults()->set_timeout_ms(1);
    CHECK(ValidateConfig(c).ok());
  }
  DaemonConfig c = Default();
  REQUIRE(SetField(&c, "limits.max_presync_window_us", std::to_string(kMaxDurationMs * 1000 + 1)));
  CHECK_THAT(std::string(ValidateConfig(c).message()),
             Catch::StartsWith("limits.max_presync_window_us: "));
  REQUIRE(SetField(&c, "limits.max_presync_window_us", std::to_string(kMaxDurationMs * 1000)));
  CHECK(ValidateConfig(c).ok());
  c = Default();
  c.mutable_sim()->add_faults()->set_name("all_reduce/slow");
  c.mutable_sim()->mutable_faults(0)->set_base("all_reduce/ring");
  c.mutable_sim()->mutable_faults(0)->set_kind(Fault::SLOW_RANK);
  c.mutable_sim()->mutable_faults(0)->set_calls(-1);
  CHECK_THAT(std::string(ValidateConfig(c).message()), Catch::StartsWith("sim.faults[0].calls: "));
  c.mutable_sim()->mutable_faults(0)->set_calls(0);
  c.mutable_sim()->mutable_faults(0)->set_delay_us(kMaxDurationMs * 1000 + 1);
  CHECK_THAT(std::string(ValidateConfig(c).message()),
             Catch::StartsWith("sim.faults[0].delay_us: "));
}

TEST_CASE("a string echoed in an error is escaped and bounded") {
  const std::string hostile = "in\nfo\x1b[31m\x01" + std::string(100000, 'x');
  for (const std::function<void(DaemonConfig*)>& change :
       std::vector<std::function<void(DaemonConfig*)>>{
           [&](DaemonConfig* c) { c->set_log_level(hostile); },
           [&](DaemonConfig* c) { c->set_backend(hostile); },
           [&](DaemonConfig* c) { c->mutable_defaults()->set_timing_mode(hostile); },
           [&](DaemonConfig* c) { c->set_metrics_listen(hostile + ":1"); },
           [&](DaemonConfig* c) { c->add_peers(hostile); },
           [&](DaemonConfig* c) { c->mutable_fleet_cache()->set_redis("unix:" + hostile); },
       }) {
    const std::string msg = Reject(change);
    INFO(msg.substr(0, 200));
    REQUIRE_FALSE(msg.empty());
    CHECK(msg.size() < 1024);
    for (const char ch : msg) CHECK((ch >= 0x20 && ch <= 0x7e));
    CHECK_THAT(msg, Catch::Contains("in\\nfo\\033[31m\\001xxx"));
  }
}

TEST_CASE("a configuration file is a regular file of bounded size, read without blocking") {
  const std::string fifo = TempPath("fifo.textproto");
  ::unlink(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // A FIFO nobody writes: a blocking open would never return.
  auto result = std::make_shared<absl::StatusOr<DaemonConfig>>(absl::UnknownError("not yet"));
  auto done = std::make_shared<absl::Notification>();
  std::thread([fifo, result, done] {
    *result = LoadConfig(fifo);
    done->Notify();
  }).detach();
  const bool returned = done->WaitForNotificationWithTimeout(absl::Seconds(10));
  if (!returned) {  // unblock the reader so that the process can end
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
    done->WaitForNotification();
  }
  CHECK(returned);
  CHECK(result->status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(result->status().message()),
             Catch::Contains(fifo) && Catch::Contains("FIFO"));

  absl::StatusOr<DaemonConfig> dir = LoadConfig(TempPath(""));
  CHECK(dir.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(dir.status().message()), Catch::Contains("directory"));

  std::string big = "log_level: \"debug\"\n";
  big += std::string(kMaxConfigFileBytes - big.size(), ' ');
  CHECK(LoadConfig(WriteTemp("at_limit.textproto", big)).ok());
  const std::string over = WriteTemp("over.textproto", big + " ");
  absl::StatusOr<DaemonConfig> got = LoadConfig(over);
  CHECK(got.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(got.status().message()),
             Catch::Contains(over) && Catch::Contains(std::to_string(kMaxConfigFileBytes)));
}

}  // namespace
}  // namespace config
}  // namespace autotuned
