#include "daemon/coordinate/admission/admission.h"

#include <memory>
#include <thread>

#include <catch2/catch.hpp>

#include "absl/time/clock.h"

namespace autotuned {
namespace {

TEST_CASE("at most the limit in flight; one more is RESOURCE_EXHAUSTED naming it") {
  metrics::Gauge gauge;
  Admission admission(2, &gauge);
  absl::StatusOr<Admission::Ticket> one = admission.Admit();
  absl::StatusOr<Admission::Ticket> two = admission.Admit();
  REQUIRE(one.ok());
  REQUIRE(two.ok());
  CHECK(gauge.value() == 2);
  absl::StatusOr<Admission::Ticket> three = admission.Admit();
  CHECK(three.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK(three.status().message() ==
        "2 rounds in progress, the most this daemon serves at once "
        "(limits.max_concurrent_rounds = 2); retry shortly");
  { Admission::Ticket gone = *std::move(two); }
  CHECK(admission.in_flight() == 1);
  CHECK(gauge.value() == 1);
  CHECK(admission.Admit().ok());  // its ticket ends at once
  admission.SetLimits(1, 1024);
  CHECK(admission.Admit().status().code() == absl::StatusCode::kResourceExhausted);
}

TEST_CASE("the waiting pool and the devices pool have bounds of their own") {
  metrics::Gauge gauge;
  Admission admission(1, &gauge, 2);
  absl::StatusOr<Admission::Ticket> w1 = admission.Admit(Admission::Slot::kWaiting);
  absl::StatusOr<Admission::Ticket> w2 = admission.Admit(Admission::Slot::kWaiting);
  REQUIRE(w1.ok());
  REQUIRE(w2.ok());
  absl::StatusOr<Admission::Ticket> w3 = admission.Admit(Admission::Slot::kWaiting);
  CHECK(w3.status().code() == absl::StatusCode::kResourceExhausted);
  CHECK_THAT(std::string(w3.status().message()),
             Catch::Contains("(limits.max_waiting_ranks = 2)"));
  absl::StatusOr<Admission::Ticket> d1 = admission.Admit(Admission::Slot::kDevices);
  REQUIRE(d1.ok());
  CHECK(gauge.value() == 3);
  CHECK(admission.in_flight(Admission::Slot::kWaiting) == 2);
  CHECK(admission.in_flight(Admission::Slot::kDevices) == 1);
  CHECK_THAT(std::string(admission.Admit().status().message()),
             Catch::Contains("(limits.max_concurrent_rounds = 1)"));
  admission.SetLimits(1, 3);
  CHECK(admission.Admit(Admission::Slot::kWaiting).ok());
}

TEST_CASE("a drain refuses new rounds and waits for those in flight") {
  Admission admission(4, nullptr);
  auto ticket = std::make_unique<absl::StatusOr<Admission::Ticket>>(admission.Admit());
  REQUIRE(ticket->ok());
  CHECK_FALSE(admission.draining());
  admission.BeginDrain();
  admission.BeginDrain();  // idempotent
  CHECK(admission.draining());
  CHECK(admission.Admit().status() == Admission::DrainingError());
  CHECK_THAT(std::string(Admission::DrainingError().message()),
             Catch::StartsWith("draining: "));
  CHECK_FALSE(admission.WaitIdle(absl::Now() + absl::Milliseconds(10)));
  std::thread done([&] {
    absl::SleepFor(absl::Milliseconds(20));
    ticket.reset();
  });
  CHECK(admission.WaitIdle(absl::Now() + absl::Seconds(20)));
  done.join();
  CHECK(admission.in_flight() == 0);
}

}  // namespace
}  // namespace autotuned
