// Cache keys: what makes two measurements interchangeable.
//
// A cached ranking may answer a request only when the node (hardware,
// software stack, catalogue), the group shape, the canonical problem
// (including its candidates and their parameters) and the timing mode are all
// the same. CacheKeyText spells all of that out as text; CacheKeyDigest turns
// the text into a short key used as the entry's name in memory and on disk.
// The full text is stored with every entry, so a digest collision is detected
// (see ResultCache) rather than answered.
//
// Every function here is stable: the same inputs give the same output in
// every process and build (FNV-1a, never absl::Hash or std::hash), so entries
// survive a daemon restart and may be copied between identical nodes.
//
// Thread-safety: pure functions, safe to call from any thread.
#pragma once

#include <string>
#include <vector>

#include "daemon/measure/backend/backend.h"
#include "proto/autotuned.pb.h"

namespace autotuned {

// The node's fingerprint: 16 lowercase hex digits, the FNV-1a 64-bit digest
// of a canonical text made of `node`'s backend, GPU count, each GPU's name and
// memory size (in index order), the topology matrix, the driver, CUDA and
// NCCL versions, and `catalogue_version` (Catalogue::Version()). Not included:
// the host name and the PCI bus ids, so identical nodes share a fingerprint.
// Any change of what is included changes the fingerprint, which makes every
// cached entry of the old one unreachable.
std::string NodeFingerprint(const NodeDescription& node,
                            const std::string& catalogue_version);

// The canonical key text of one cacheable measurement: a few lines naming
// `fingerprint`, the group shape (`world_size`, `ranks_per_host`),
// `timing_mode` (a v1::TimingMode value, already resolved: never
// TIMING_MODE_UNSPECIFIED in practice) and `canonical_problem` in
// single-line protobuf text format (map keys sorted, so candidate parameters
// inserted in any order give the same text). The problem's `label` is left
// out: it only names the problem for the caller and does not change what is
// measured; so are the names of client candidates (their keys stay in). Callers pass the canonical problem (defaults filled in, every
// candidate parameter present) so that equivalent requests share a key.
// `placement` (PlacementText) tells apart groups of one shape placed on GPUs
// with different links between them.
std::string CacheKeyText(const std::string& fingerprint, int world_size,
                         int ranks_per_host,
                         const v1::Problem& canonical_problem, int timing_mode,
                         const std::string& placement = "");

// What the placement of this node's ranks changes in a measurement: the link
// kinds of `node`.topology between the GPUs of every pair of ranks run here,
// in rank order ("links: NV18" for two ranks on NVLinked GPUs). `devices` as
// ScheduleOptions::devices (DeviceOf) for `ranks_here` ranks.
// Two groups whose GPUs are linked alike (GPUs 0,1 and 2,3 of an NVSwitch
// node) share a text, so they share cached results; others do not. Empty
// when the node reports no topology.
std::string PlacementText(const NodeDescription& node, const std::vector<int>& devices,
                          int ranks_here);

// The key of `key_text`: 32 lowercase hex digits, two FNV-1a 64-bit digests
// of the text with different seeds. Also the entry's file name stem.
std::string CacheKeyDigest(const std::string& key_text);

// CacheKeyDigest(CacheKeyText(...)).
std::string CacheKey(const std::string& fingerprint, int world_size,
                     int ranks_per_host, const v1::Problem& canonical_problem,
                     int timing_mode, const std::string& placement = "");

// True when `key` has the form of a CacheKeyDigest (32 lowercase hex digits).
bool IsCacheKey(const std::string& key);

// The world size recorded in `key_text`, or 0 when it has none.
int KeyTextWorldSize(const std::string& key_text);
// The link kinds of the placement recorded in `key_text` ("NV18 NV18 SYS"),
// or "" when it has none.
std::string KeyTextLinks(const std::string& key_text);

}  // namespace autotuned
