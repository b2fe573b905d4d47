#!/usr/bin/env bash
# bench/run.sh ENGINE [OUTDIR]: the load figures of bench/RESULTS.md for one
# storage engine (sqlite or postgres), server and load generator on this
# machine. PostgreSQL runs use a fresh database (dropped afterwards) on
# SYNCD_BENCH_PG (default postgres://postgres@127.0.0.1:5432).
set -euo pipefail
engine=${1:?usage: bench/run.sh sqlite|postgres [outdir]}
out=${2:-$(mktemp -d /tmp/syncd-bench.XXXXXX)}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/.." && pwd)
schema=${SYNCD_BENCH_SCHEMA:-$here/../shared/fixtures/tasks.ir.json}
dur=${SYNCD_BENCH_DURATION:-20s}
(git -C "$here" describe --always --dirty 2>/dev/null || echo unknown) >"$out/version.txt"
go build -o "$out/syncd" "$here/cmd/syncd"
go build -o "$out/syncload" "$here/cmd/syncload"

case $engine in
sqlite) db=$out/load.db; rm -f "$db"* ;;
postgres)
	pg=${SYNCD_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
	name=syncd_bench_$$
	psql "$pg/postgres" -qc "CREATE DATABASE $name"
	trap 'psql "$pg/postgres" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)"' EXIT
	db="$pg/$name?sslmode=disable" ;;
*) echo "engine: sqlite or postgres" >&2; exit 2 ;;
esac

# Datasets: 100,000 and 20,000 rows for the storm, as ordinary commits.
"$out/syncd" seed --schema "$schema" --database "$db" --rows 100000 --value storm | tee "$out/seed.txt"
"$out/syncd" seed --schema "$schema" --database "$db" --rows 20000 --value storm20k | tee -a "$out/seed.txt"

"$out/syncd" serve --schema "$schema" --auth dev --database "$db" --log-level warn --pprof >"$out/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; [ "$engine" = postgres ] && psql "$pg/postgres" -qc "DROP DATABASE IF EXISTS $name WITH (FORCE)"' EXIT
for _ in $(seq 100); do curl -sf http://127.0.0.1:8788/readyz >/dev/null && break; sleep 0.1; done

load() { # name args...
	local n=$1; shift
	uptime >"$out/$n.load"
	# A CPU profile of the server over 8 s of the run (admin listener).
	(sleep "${delay:-2}"; curl -s -o "$out/$n.cpu" "http://127.0.0.1:8788/debug/pprof/profile?seconds=8") &
	local prof=$!
	"$out/syncload" --schema "$schema" --server-pid $pid --json "$out/$n.json" "$@" | tee "$out/$n.txt"
	wait $prof
	# Allocations since the server started (pprof -sample_index=alloc_space).
	curl -s -o "$out/$n.allocs" "http://127.0.0.1:8788/debug/pprof/allocs"
}
load pp1 --vus 1 --duration "$dur" push-pull
load pp10 --vus 10 --duration "$dur" push-pull
load pp50 --vus 50 --duration "$dur" push-pull
load storm20k --vus 20 --duration "$dur" --storm-project storm20k --dataset 20000 --limit-rows 50000 --max-pages 50 bootstrap-storm
load storm100k --vus 20 --duration "$dur" --dataset 100000 --limit-rows 50000 --max-pages 50 bootstrap-storm
load storm100k1 --vus 1 --duration 10s --dataset 100000 --limit-rows 50000 --max-pages 50 bootstrap-storm
delay=12 load catchup --vus 10 --duration "$dur" --dataset 5000 catch-up
grep VmHWM /proc/$pid/status | tee "$out/vmhwm.txt"
echo "results in $out"
