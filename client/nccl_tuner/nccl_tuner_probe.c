/* nccl_tuner_probe LIB NRANKS NNODES: loads LIB as NCCL does (dlopen,
 * ncclTunerPlugin_v5: init, getCollInfo, finalize) and prints, for
 * all_reduce, all_gather, reduce_scatter and broadcast at every power of
 * two from 1 byte to 1 TiB and one byte either side of it, what the plugin
 * wrote into a cost table of positive costs: "<collective> <bytes> <algo>
 * <proto> <channels>", algo and proto "-" when no entry was made the
 * cheapest. For the end-to-end test (tune_nccl_sim_test.sh). */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "client/nccl_tuner/nccl_tuner_abi.h"

#define ALGOS 7
#define PROTOS 3

static void probe(const at_nccl_tuner_v5_t* t, void* ctx, at_nccl_func_t func, const char* name,
                  uint64_t bytes, const char* (*algo_name)(int), const char* (*proto_name)(int)) {
  float cost[ALGOS][PROTOS];
  int a, p, channels = 0, best_a = -1, best_p = -1;
  for (a = 0; a < ALGOS; ++a) {
    for (p = 0; p < PROTOS; ++p) cost[a][p] = 100.0f;
  }
  t->getCollInfo(ctx, func, (size_t)bytes, 1, (float**)cost, ALGOS, PROTOS, 0, &channels);
  for (a = 0; a < ALGOS; ++a) {
    for (p = 0; p < PROTOS; ++p) {
      if (cost[a][p] == 0.0f) {
        best_a = a;
        best_p = p;
      }
    }
  }
  printf("%s %llu %s %s %d\n", name, (unsigned long long)bytes,
         best_a < 0 ? "-" : algo_name(best_a), best_p < 0 ? "-" : proto_name(best_p), channels);
}

int main(int argc, char** argv) {
  static const struct {
    at_nccl_func_t func;
    const char* name;
  } kColls[] = {{AT_NCCL_FUNC_ALL_REDUCE, "all_reduce"},
                {AT_NCCL_FUNC_ALL_GATHER, "all_gather"},
                {AT_NCCL_FUNC_REDUCE_SCATTER, "reduce_scatter"},
                {AT_NCCL_FUNC_BROADCAST, "broadcast"}};
  void* lib;
  const at_nccl_tuner_v5_t* t;
  const char* (*algo_name)(int);
  const char* (*proto_name)(int);
  void* ctx = NULL;
  size_t c;
  int k;
  if (argc != 4) {
    fprintf(stderr, "usage: nccl_tuner_probe LIB NRANKS NNODES\n");
    return 2;
  }
  lib = dlopen(argv[1], RTLD_NOW);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  t = (const at_nccl_tuner_v5_t*)dlsym(lib, "ncclTunerPlugin_v5");
  *(void**)&algo_name = dlsym(lib, "at_nccl_tuner_algo_name");
  *(void**)&proto_name = dlsym(lib, "at_nccl_tuner_proto_name");
  if (t == NULL || algo_name == NULL || proto_name == NULL) {
    fprintf(stderr, "%s lacks the tuner's symbols\n", argv[1]);
    return 1;
  }
  if (t->init(&ctx, 1, (size_t)atoll(argv[2]), (size_t)atoll(argv[3]), NULL, NULL, NULL) != 0) {
    fprintf(stderr, "init failed\n");
    return 1;
  }
  for (c = 0; c < sizeof(kColls) / sizeof(kColls[0]); ++c) {
    for (k = 0; k <= 40; ++k) {
      const uint64_t b = (uint64_t)1 << k;
      probe(t, ctx, kColls[c].func, kColls[c].name, b - 1, algo_name, proto_name);
      probe(t, ctx, kColls[c].func, kColls[c].name, b, algo_name, proto_name);
      probe(t, ctx, kColls[c].func, kColls[c].name, b + 1, algo_name, proto_name);
    }
  }
  t->finalize(ctx);
  return 0;
}
