#!/usr/bin/env bash
# Counts an idle observer's system calls (strace -c) over 20 s for two agent
# builds and a bare memberlist node, all running at once on loopback: a
# 5-agent majority cluster (3 voters) per build, started by
# profile-cluster.sh, and wakefloor's LAN gossip cluster. Wake-ups
# (epoll_pwait, futex, nanosleep) are most of an idle observer's cost, and
# a count does not move with the machine's load as a CPU share does.
#
#   go build -o /tmp/agent.old ./cmd/agent   # at the older commit
#   go build -o /tmp/agent.new ./cmd/agent   # at the newer one
#   (cd bench && go build -o /tmp/wakefloor ./cmd/wakefloor)
#   bash bench/observer-wakes.sh /tmp/agent.old /tmp/agent.new /tmp/wakefloor
#
# usage: observer-wakes.sh OLD_BIN NEW_BIN WAKEFLOOR_BIN
set -euo pipefail
OLD=$1 NEW=$2 WF=$3
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
N=5 V=3 SETTLE=8 bash "$here/profile-cluster.sh" "$OLD" majority "$out/old" 40 >"$out/old.summary" 2>&1 &
N=5 V=3 SETTLE=8 bash "$here/profile-cluster.sh" "$NEW" majority "$out/new" 40 >"$out/new.summary" 2>&1 &
(sleep 50 | "$WF" -hold -followers 4 -interval 50ms -gossip lan -observers 2 >"$out/wf.out" 2>&1) &
sleep 14
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
pid_old=$(pgrep -f "$OLD run -node.name=n4 " | head -1 || true)
pid_new=$(pgrep -f "$NEW run -node.name=n4 " | head -1 || true)
pid_wf=$(grep '"observer"' "$out/wf.out" | head -1 | sed 's/.*"pid":\([0-9]*\).*/\1/' || true)
if [ -z "$pid_old" ] || [ -z "$pid_new" ] || [ -z "$pid_wf" ]; then
	echo "an observer did not start (old '$pid_old', new '$pid_new', memberlist '$pid_wf'):" >&2
	tail -n 3 "$out"/*.summary "$out"/*/n4.log "$out/wf.out" >&2 || true
	wait
	exit 1
fi
for x in "old:$pid_old" "new:$pid_new" "memberlist:$pid_wf"; do
	timeout 20 strace -c -f -p "${x#*:}" -o "$out/${x%%:*}.strace" >/dev/null 2>&1 &
done
wait
for x in old new memberlist; do
	echo "$x observer, 20 s: $(awk '/epoll_pwait|futex|nanosleep|sendto|recvfrom|total/{printf "%s=%s ", $NF, $4}' "$out/$x.strace")"
done
