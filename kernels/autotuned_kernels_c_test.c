/* The C ABI header compiles as C (C99) and its pure host functions link and
 * run from C. */
#include <stdio.h>
#include <string.h>

#include "kernels/autotuned_kernels.h"

int main(void) {
  at_p2p_limits limits;
  at_p2p_args args;
  char reason[128];
  int rc;
  if (at_kernels_version() != AT_KERNELS_VERSION) return 1;
  if (at_p2p_args_size() != sizeof(at_p2p_args)) return 2;
  at_p2p_get_limits(&limits);
  if (limits.max_world != AT_P2P_MAX_WORLD || limits.signal_bytes != at_p2p_signal_bytes()) {
    return 3;
  }
  memset(&args, 0, sizeof(args));
  args.world = 2;
  args.blocks = 0;
  rc = at_p2p_check_args(AT_ALGO_ALL_REDUCE_ONE_SHOT, &args, reason, sizeof(reason));
  if (rc != AT_ERR_INVALID_VALUE || strlen(reason) == 0) return 4;
  args.dtype = AT_DTYPE_FLOAT32;
  args.blocks = 1;
  args.threads = 32;
  args.peer_signals = NULL;
  rc = at_p2p_check_all_to_all_v(&args, NULL, reason, sizeof(reason));
  if (rc != AT_ERR_INVALID_VALUE || strstr(reason, "peer_signals") == NULL) return 5;
  if (strcmp(at_p2p_algo_name(AT_ALGO_ALL_TO_ALL_V), "all_to_all_v") != 0) return 6;
  printf("C ABI ok: version %d, signal %lld bytes, rejected: %s\n", at_kernels_version(),
         (long long)at_p2p_signal_bytes(), reason);
  return 0;
}
