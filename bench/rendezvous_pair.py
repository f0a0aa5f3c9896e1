#!/usr/bin/env python3
"""Pairs rendezvous_bench --latencies_out with the leader's log (--log_level=info).

The leader logs, for each per-rank round it measured, a line
  round=... group=G seq=S world=W rank=K (ran it) problems=P waited_ms=X ms=Y overhead_us=Z ...
where ms is the time it spent measuring and Z the rendezvous' own cost as the
daemon sees it (the last rank's request in -> every answer published, minus
ms); for a group spread over daemons,
  round=... group=G seq=S world=W across N daemons run=... measured=P ms=Y ...
where ms runs from its GO to the max-reduced timings: the measurement across
the daemons, buffer exchanges through the leader included. The last rank's client-side latency
minus that is the round's coordination overhead (it includes one gRPC call
over the Unix socket, and for followers the Peer hop to the leader and back).

  rendezvous_pair.py LATENCIES LEADER_LOG
"""
import re
import sys


def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * (len(v) - 1) + 0.5))] if v else 0.0


def stats(v):
    return "n %4d  p50 %10.1f us  p90 %10.1f us  p99 %10.1f us  min %10.1f us  max %10.1f us" % (
        len(v), pct(v, .5), pct(v, .9), pct(v, .99), pct(v, 0), pct(v, 1))


def main():
    lines = open(sys.argv[1]).read().split("\n")
    group = lines[0].split()[1]
    lat = {int(l.split()[0]): float(l.split()[1]) for l in lines[1:] if l.strip()}
    # Rounds run one after another, so the n-th such line is round n.
    log = open(sys.argv[2], errors="replace").read().splitlines()
    pat = re.compile(r"group=%s seq=\d+ .*(?:\(ran it\)|across \d+ daemons).* ms=([0-9.]+)"
                     % re.escape(group))
    ran = [float(m.group(1)) for m in map(pat.search, log) if m]
    if not ran:
        print("  leader's log: no '(ran it)' or 'across' lines for this group; no pairing")
        return
    if len(ran) != max(lat) + 1:
        print("  leader's log: %d measured-round lines for %d rounds; pairing by order anyway"
              % (len(ran), max(lat) + 1))
    own = re.compile(r"group=%s seq=\d+ .*\(ran it\).* overhead_us=([0-9.-]+)" % re.escape(group))
    inside = [float(m.group(1)) for m in map(own.search, log) if m]
    measure, over = [], []
    for i, ms in enumerate(ran):
        measure.append(ms * 1000)
        if i in lat:
            over.append(lat[i] - ms * 1000)
    print("  leader's measuring time per round (its log, ms=)     " + stats(measure))
    print("  overhead = last rank's latency - leader's measuring time, paired per round")
    print("  (includes the rank's own gRPC call; followers: also the Peer hop):")
    print("                                                       " + stats(over))
    if inside:
        print("  the daemon's own figure (its log, overhead_us=): the last rank's request")
        print("  reaching the daemon -> every rank's answer published, minus measuring:")
        print("                                                       " + stats(inside))


main()
