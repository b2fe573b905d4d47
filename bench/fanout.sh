#!/usr/bin/env bash
# bench/fanout.sh [OUTDIR]: the fanout figures of bench/RESULTS.md. Two
# `syncd serve` nodes on one PostgreSQL schema, with --fanout postgres
# (LISTEN/NOTIFY) and with --fanout nats, alternating per round (A B, then
# B A, ...), each run on a fresh schema:
#
#   push-pull    SYNCD_BENCH_VUS clients (default 200) over
#                SYNCD_BENCH_PARTITIONS partitions (default 200; client i in
#                partition i mod N), the clients spread over both nodes
#   propagation  SYNCD_BENCH_PAIRS writer/receiver pairs (default 50), each
#                in a partition of its own, the receiver's socket on the
#                node after its writer's: every delivery crosses nodes
#   propagation  again with one pair: the latency of an unloaded server
#
# for SYNCD_BENCH_DURATION each (default 10s), SYNCD_BENCH_ROUNDS rounds
# (default 4). Before and after each run it records /proc/loadavg, the
# nodes' CPU (/proc/<pid>/stat) over the loaded scenarios and their
# fanout counters after all three. The
# database is SYNCD_BENCH_PG (default the server on 127.0.0.1:5432,
# database test), NATS SYNCD_BENCH_NATS (default nats://127.0.0.1:4222).
# The nodes admit 256 requests at once (--max-inflight-requests; the
# default 64 turns 200 clients on two nodes into 429s). Ports
# 19751-19754; everything stays on 127.0.0.1.
set -euo pipefail
out=${1:-$(mktemp -d /tmp/syncd-fanout.XXXXXX)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
schema=${SYNCD_BENCH_SCHEMA:-$here/../shared/fixtures/tasks.ir.json}
dur=${SYNCD_BENCH_DURATION:-10s}
rounds=${SYNCD_BENCH_ROUNDS:-4}
vus=${SYNCD_BENCH_VUS:-200}
parts=${SYNCD_BENCH_PARTITIONS:-200}
pairs=${SYNCD_BENCH_PAIRS:-50}
pg=${SYNCD_BENCH_PG:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
nats=${SYNCD_BENCH_NATS:-nats://127.0.0.1:4222}
a_api=127.0.0.1:19751 a_admin=127.0.0.1:19752
b_api=127.0.0.1:19753 b_admin=127.0.0.1:19754
(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown) >"$out/version.txt"
go build -o "$out/syncd" "$here/cmd/syncd"
go build -o "$out/syncload" "$here/cmd/syncload"

pids=() bench_schema=""
stop_nodes() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	pids=()
	if [ -n "$bench_schema" ]; then
		PGOPTIONS='-c client_min_messages=warning' psql "$pg" -qc "DROP SCHEMA IF EXISTS $bench_schema CASCADE" >/dev/null
		bench_schema=""
	fi
}
trap stop_nodes EXIT

cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{printf "%d\n", ($14+$15)*1000/hz}' "/proc/$1/stat"; }
notices() { # published/received notices of the node at admin address $1
	curl -s "http://$1/metrics" | awk 'index($1, "syncd_fanout_notices_total{") == 1 {sub(/.*event="/, "", $1); sub(/".*/, "", $1); printf "%s=%s ", $1, $2}'
}

start_nodes() { # engine run-name
	bench_schema=syncd_fanout_$$_${2/-/_}
	psql "$pg" -qc "CREATE SCHEMA $bench_schema" >/dev/null
	local db="$pg&search_path=$bench_schema" flags=(--fanout "$1")
	[ "$1" = nats ] && flags+=(--nats-url "$nats")
	local api admin
	for node in "$a_api $a_admin" "$b_api $b_admin"; do
		read -r api admin <<<"$node"
		"$out/syncd" serve --schema "$schema" --auth dev --database "$db" --log-level warn --shutdown-delay 0 --max-inflight-requests 256 \
			--listen "$api" --admin-listen "$admin" "${flags[@]}" >>"$out/$2.server.log" 2>&1 &
		pids+=($!)
		for _ in $(seq 300); do curl -sf "http://$admin/readyz" >/dev/null && break; sleep 0.1; done
		curl -sf "http://$admin/readyz" >/dev/null || { echo "node $api not ready" >&2; exit 1; }
	done
}

run() { # engine round
	local engine=$1 n=$1-r$2
	start_nodes "$engine" "$n"
	local c0 c1
	c0=$(( $(cpu_ms "${pids[0]}") + $(cpu_ms "${pids[1]}") ))
	{ printf 'before '; cat /proc/loadavg; } >"$out/$n.load"
	local L=("$out/syncload" --url "http://$a_api,http://$b_api" --schema "$schema" --timeout 30s --duration "$dur")
	"${L[@]}" --vus "$vus" --partitions "$parts" --json "$out/$n.pushpull.json" push-pull >"$out/$n.pushpull.txt"
	{ printf 'middle '; cat /proc/loadavg; } >>"$out/$n.load"
	"${L[@]}" --vus "$pairs" --partitions "$pairs" --json "$out/$n.propagation.json" propagation >"$out/$n.propagation.txt"
	c1=$(( $(cpu_ms "${pids[0]}") + $(cpu_ms "${pids[1]}") ))
	"${L[@]}" --vus 1 --json "$out/$n.propagation1.json" propagation >"$out/$n.propagation1.txt"
	{ printf 'after  '; cat /proc/loadavg; } >>"$out/$n.load"
	local pp pr p1
	pp=$(jq -r '.[0] | "push-pull \(.requestsPerSecond|floor) req/s, push \((.ops[]|select(.kind=="push")|"\(.perSecond|floor)/s p50 \(.p50Ms) p99 \(.p99Ms)")), errors \(.errors)"' "$out/$n.pushpull.json")
	pr=$(jq -r '.[0] | "propagation \((.ops[]|select(.kind=="propagation")|"n \(.count) p50 \(.p50Ms) p99 \(.p99Ms) max \(.maxMs)")), push \((.ops[]|select(.kind=="push")|"\(.perSecond|floor)/s")), errors \(.errors)"' "$out/$n.propagation.json")
	p1=$(jq -r '.[0] | "one pair \((.ops[]|select(.kind=="propagation")|"n \(.count) p50 \(.p50Ms) p99 \(.p99Ms)")), errors \(.errors)"' "$out/$n.propagation1.json")
	echo "$n | $pp | $pr | $p1 | nodes cpu $(( c1 - c0 )) ms | a: $(notices $a_admin)| b: $(notices $b_admin)| load $(awk '{printf "%s ", $2}' "$out/$n.load")" | tee -a "$out/summary.txt"
	stop_nodes
}

for r in $(seq "$rounds"); do
	if [ $((r % 2)) -eq 1 ]; then order="postgres nats"; else order="nats postgres"; fi
	for e in $order; do
		run "$e" "$r"
	done
done
echo "results in $out"
