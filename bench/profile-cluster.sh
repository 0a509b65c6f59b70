#!/usr/bin/env bash
# Starts N real agents on loopback (V of them voters, the rest observers),
# lets them settle, measures each one's CPU (user + system, /proc/PID/stat)
# and RSS over WINDOW seconds, then stops them with SIGTERM so each writes a
# CPU profile of its life (CONCLAVE_CPUPROFILE) to OUT/nK.prof. Run two of
# these at once, one per binary, to compare builds under the same load:
#
#   go build -o /tmp/agent.old ./cmd/agent   # at the older commit
#   go build -o /tmp/agent.new ./cmd/agent   # at the newer one
#   bash bench/profile-cluster.sh /tmp/agent.old majority /tmp/old 40 &
#   bash bench/profile-cluster.sh /tmp/agent.new majority /tmp/new 40; wait
#   N=20 V=3 SETTLE=15 bash bench/profile-cluster.sh …   # a small fleet
#   go tool pprof -top /tmp/agent.new /tmp/new/n1.prof
#
# With TRACE=1 each agent also writes a Go execution trace of its life
# (CONCLAVE_TRACE) to OUT/nK.trace; bench/cmd/wakes counts what woke it:
#   cd bench && go run ./cmd/wakes -skip 10s -window 40s /tmp/new/n2.trace
#
# usage: [N=5] [V=N] [SETTLE=10] [TRACE=1] profile-cluster.sh BIN PROTOCOL OUT WINDOW_S [agent flags…]
# The ports are picked at random between 20000 and 60000; a collision
# shows as an agent that failed to start (its log is in OUT).
set -euo pipefail
BIN=$1 PROTO=$2 OUT=$3 WIN=$4
shift 4
N=${N:-5} V=${V:-$N} SETTLE=${SETTLE:-10}
rm -rf "$OUT"
mkdir -p "$OUT"
base=$((20000 + (RANDOM % 400) * 100))
names=() binds=()
for i in $(seq 0 $((N - 1))); do
	names+=("n$((i + 1))")
	binds+=("127.0.0.1:$((base + i))")
done
voters=$(IFS=,; echo "${names[*]:0:$V}")
pids=()
for i in $(seq 0 $((N - 1))); do
	n=${names[$i]} join=()
	for j in 0 1 2 3 4; do
		if [ "$j" != "$i" ] && [ "$j" -lt "$N" ]; then join+=("${binds[$j]}"); fi
	done
	mkdir -p "$OUT/$n"
	CONCLAVE_TRACE=${TRACE:+$OUT/$n.trace} \
	CONCLAVE_CPUPROFILE="$OUT/$n.prof" "$BIN" run -node.name="$n" -node.id=$((i + 1)) -node.data_dir="$OUT/$n" \
		-gossip.bind="${binds[$i]}" -gossip.join="$(IFS=,; echo "${join[*]}")" \
		-transport.listen="/ip4/127.0.0.1/tcp/$((base + N + i))" -election.protocol="$PROTO" \
		-election.voters="$voters" -api.socket="$OUT/$n/agent.sock" -log.level=info "$@" \
		>"$OUT/$n.log" 2>&1 &
	pids+=($!)
done
trap 'kill -TERM "${pids[@]}" 2>/dev/null || true' EXIT
sleep "$SETTLE"
views() {
	for n in "${names[@]}"; do
		curl -s --unix-socket "$OUT/$n/agent.sock" http://agent/v1/status |
			python3 -c 'import json,sys; d=json.load(sys.stdin); print("epoch", d.get("epoch"), "leader", d.get("leader"))' 2>/dev/null || echo "no answer"
	done | sort | uniq -c | tr -s ' \n' ' '
}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
declare -A c0
for p in "${pids[@]}"; do c0[$p]=$(cpu "$p"); done
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg); views: $(views)"
sleep "$WIN"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg); views: $(views)"
tick=$(getconf CLK_TCK)
for i in $(seq 0 $((N - 1))); do
	p=${pids[$i]}
	st=$(curl -s --unix-socket "$OUT/${names[$i]}/agent.sock" http://agent/v1/status | python3 -c 'import json,sys; print(json.load(sys.stdin)["role"])' 2>/dev/null || echo "?")
	awk -v a="${c0[$p]}" -v b="$(cpu "$p")" -v t="$tick" -v w="$WIN" -v n="${names[$i]}" -v r="$st" \
		-v rss="$(awk '/VmRSS/{print $2}' "/proc/$p/status")" \
		'BEGIN{printf "%s %s cpu %.2f%% rss %.1fMB\n", n, r, (b-a)/t/w*100, rss/1024}'
done
kill -TERM "${pids[@]}"
trap - EXIT
wait
