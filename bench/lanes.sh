#!/usr/bin/env bash
# bench/lanes.sh ENGINE [OUTDIR]: the bootstrap-lane figures of
# bench/RESULTS.md for one storage engine (sqlite or postgres): one Go
# client (syncload, 1 virtual client) bootstrapping 100,000 and 30,000 rows
# on the rows lane and on the sqlite image lane against `syncd serve`,
# first a single cold bootstrap (the server builds the segments; two
# requests: the epoch acquisition and the bootstrap pull) and then
# warm ones for SYNCD_BENCH_DURATION (default 10s; the segments are
# reused). Around each run it reads the server's CPU (/proc/<pid>/stat)
# and the bytes it sent (syncd_http_response_bytes_total, after
# compression: the client asks for zstd). Ports 19741/19742, so a run does
# not meet another server on the defaults.
set -euo pipefail
engine=${1:?usage: bench/lanes.sh sqlite|postgres [outdir]}
out=${2:-$(mktemp -d /tmp/syncd-lanes.XXXXXX)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
schema=${SYNCD_BENCH_SCHEMA:-$here/../shared/fixtures/tasks.ir.json}
dur=${SYNCD_BENCH_DURATION:-10s}
api=127.0.0.1:19741
admin=127.0.0.1:19742
(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown) >"$out/version.txt"
go build -o "$out/syncd" "$here/cmd/syncd"
go build -o "$out/syncload" "$here/cmd/syncload"

case $engine in
sqlite) db=$out/lanes.db; rm -f "$db"* ;;
postgres)
	pg=${SYNCD_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
	name=syncd_lanes_$$
	psql "$pg/postgres" -qc "CREATE DATABASE $name"
	trap 'psql "$pg/postgres" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)"' EXIT
	db="$pg/$name?sslmode=disable" ;;
*) echo "engine: sqlite or postgres" >&2; exit 2 ;;
esac

"$out/syncd" seed --schema "$schema" --database "$db" --rows 100000 --value storm | tee "$out/seed.txt"
"$out/syncd" seed --schema "$schema" --database "$db" --rows 30000 --value storm30k | tee -a "$out/seed.txt"

"$out/syncd" serve --schema "$schema" --auth dev --database "$db" --log-level warn \
	--listen $api --admin-listen $admin >"$out/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; [ "$engine" = postgres ] && psql "$pg/postgres" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)"' EXIT
for _ in $(seq 100); do curl -sf http://$admin/readyz >/dev/null && break; sleep 0.1; done

cpu_ms() { # user+system CPU of the server so far, in ms
	awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15)*1000/hz}' /proc/$pid/stat
}
sent() { # bytes the server sent on a route (after compression)
	curl -s http://$admin/metrics | awk -v r="$1" 'index($1, "syncd_http_response_bytes_total{") == 1 && index($1, "route=\"" r "\"") > 0 {s+=$2} END {printf "%d", s}'
}
run() { # name args...
	local n=$1; shift
	uptime >"$out/$n.load"
	local c0 s0 g0
	c0=$(cpu_ms); s0=$(sent /sync); g0=$(sent "/segments/{segmentId}")
	"$out/syncload" --url "http://$api" --schema "$schema" --server-pid $pid --accept-encoding zstd --json "$out/$n.json" "$@" | tee "$out/$n.txt"
	local bootstraps
	bootstraps=$(jq '[.[0].ops[] | select(.kind=="bootstrap") | .count] | add' "$out/$n.json")
	echo "$n: bootstraps $bootstraps, server cpu $(echo "$(cpu_ms) - $c0" | bc) ms, sent /sync $(( $(sent /sync) - s0 )) B, /segments $(( $(sent "/segments/{segmentId}") - g0 )) B" | tee -a "$out/summary.txt"
}
for set in "100k storm 100000" "30k storm30k 30000"; do
	read -r tag value rows <<<"$set"
	for lane in rows image; do
		flags=()
		[ "$lane" = image ] && flags=(--sqlite-images)
		run "$lane$tag-cold" --vus 1 --requests 2 --storm-project "$value" --dataset "$rows" "${flags[@]}" bootstrap-storm
		run "$lane$tag-warm" --vus 1 --duration "$dur" --storm-project "$value" --dataset "$rows" "${flags[@]}" bootstrap-storm
	done
done
grep VmHWM /proc/$pid/status | tee "$out/vmhwm.txt"
echo "results in $out"
