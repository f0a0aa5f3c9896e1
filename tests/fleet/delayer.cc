// A packet delayer for kernels without sch_netem: holds every packet that
// the firewall hands to NFQUEUE queue --queue for --delay_ms, then accepts
// it, as `tc netem delay` would (no jitter, no reordering beyond what equal
// delays keep). Packets are queued with their metadata only (no payload is
// copied); verdicts go out by packet id when each packet is due. The queue
// fails open: a full queue, or no delayer listening (with the rule's
// --queue-bypass), lets packets through undelayed instead of dropping them.
//
//   ip netns exec H delayer --queue=0 --delay_ms=50 &
//   ip netns exec H iptables -A OUTPUT -o eth0 -j NFQUEUE --queue-num 0 --queue-bypass
//
// Prints "delayer: ready" on stderr once bound; SIGTERM or SIGINT accepts
// every packet it holds and exits 0. tests/fleet/README.md describes its use.
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <libnfnetlink/libnfnetlink.h>
#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <deque>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"

ABSL_FLAG(int, queue, 0, "the NFQUEUE queue number to serve");
ABSL_FLAG(int, delay_ms, 50, "how long each packet is held");

namespace {

using Clock = std::chrono::steady_clock;

volatile std::sig_atomic_t stop_requested = 0;
void OnSignal(int) { stop_requested = 1; }

struct Held {
  uint32_t id;
  Clock::time_point due;
};

struct State {
  std::deque<Held> held;  // in arrival order, so in order of due time
  Clock::duration delay;
};

int OnPacket(nfq_q_handle*, nfgenmsg*, nfq_data* data, void* arg) {
  auto* state = static_cast<State*>(arg);
  const nfqnl_msg_packet_hdr* hdr = nfq_get_msg_packet_hdr(data);
  if (hdr != nullptr) {
    state->held.push_back({ntohl(hdr->packet_id), Clock::now() + state->delay});
  }
  return 0;
}

// Accepts every held packet due by `now` (all of them when `all`).
void Release(nfq_q_handle* queue, State* state, bool all) {
  const Clock::time_point now = Clock::now();
  while (!state->held.empty() && (all || state->held.front().due <= now)) {
    nfq_set_verdict(queue, state->held.front().id, NF_ACCEPT, 0, nullptr);
    state->held.pop_front();
  }
}

int MillisUntilDue(const State& state) {
  if (state.held.empty()) return 100;  // wakes up to notice a signal
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      state.held.front().due - Clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count()) + 1;
}

int Serve(nfq_handle* handle, nfq_q_handle* queue, State* state) {
  const int fd = nfq_fd(handle);
  alignas(8) static char buf[1 << 16];
  while (stop_requested == 0) {
    pollfd p = {fd, POLLIN, 0};
    const int ready = poll(&p, 1, MillisUntilDue(*state));
    if (ready < 0 && errno != EINTR) {
      perror("delayer: poll");
      return 1;
    }
    if (ready > 0) {
      for (;;) {
        const ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (n > 0) {
          nfq_handle_packet(handle, buf, static_cast<int>(n));
          continue;
        }
        // ENOBUFS: the kernel dropped messages for us (the queue fails
        // open, so those packets passed undelayed); keep serving.
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS &&
            errno != EINTR) {
          perror("delayer: recv");
          return 1;
        }
        break;
      }
    }
    Release(queue, state, false);
  }
  Release(queue, state, true);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  State state;
  state.delay = std::chrono::milliseconds(absl::GetFlag(FLAGS_delay_ms));
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  nfq_handle* handle = nfq_open();
  if (handle == nullptr) {
    perror("delayer: nfq_open");
    return 1;
  }
  nfq_q_handle* queue = nfq_create_queue(
      handle, static_cast<uint16_t>(absl::GetFlag(FLAGS_queue)), &OnPacket, &state);
  if (queue == nullptr || nfq_set_mode(queue, NFQNL_COPY_META, 0) < 0) {
    fprintf(stderr, "delayer: cannot bind queue %d (another listener, or no "
            "CONFIG_NETFILTER_NETLINK_QUEUE?)\n", absl::GetFlag(FLAGS_queue));
    nfq_close(handle);
    return 1;
  }
  nfq_set_queue_maxlen(queue, 65536);
  nfq_set_queue_flags(queue, NFQA_CFG_F_FAIL_OPEN, NFQA_CFG_F_FAIL_OPEN);
  nfnl_rcvbufsiz(nfq_nfnlh(handle), 16 << 20);
  fprintf(stderr, "delayer: ready (queue %d, %d ms)\n", absl::GetFlag(FLAGS_queue),
          absl::GetFlag(FLAGS_delay_ms));
  const int rc = Serve(handle, queue, &state);
  nfq_destroy_queue(queue);
  nfq_close(handle);
  return rc;
}
