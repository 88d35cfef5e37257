#!/bin/bash
# A PostgreSQL stopped for two minutes while machine a runs a 180 s guarded task; machine b runs
# meanwhile and after. Needs a cluster with its socket in $PGSOCK (default /tmp/pgtry) and data in
# $PGSOCK/data, run as root (pg_ctl as postgres); run from an empty directory holding s.toml (below).
# The transcript goes to the terminal and to $OUT/pg_two_minute_outage-STAMP.txt (OUT: default
# bench-results/ at the repository root, outside git); an example is in
# bench/examples/pg_two_minute_outage.txt. The schedule:
#   long: sleep 180, on_one_server + without_overlapping; free: echo, every minute.
PGSOCK=${PGSOCK:-/tmp/pgtry}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/bench-results}
mkdir -p "$OUT"
exec > >(tee "$OUT/pg_two_minute_outage-$(date -u +%Y%m%dT%H%M%SZ).txt") 2>&1
. "$ROOT/.venv/bin/activate" 2>/dev/null || true
export PYTHONPATH=$ROOT CRONCTL_COORDINATION="postgresql://postgres@/twomin?host=$PGSOCK"
PGCTL="runuser -u postgres -- /usr/lib/postgresql/15/bin/pg_ctl -D $PGSOCK/data -w -l $PGSOCK/log"
psql -h $PGSOCK -U postgres -c "drop database if exists twomin with (force)" -c "create database twomin" >/dev/null
ts() { date -u +%H:%M:%S; }
echo "$(ts) A starts long (180 s) at 10:00"
CRONCTL_HOST=a CRONCTL_STATE_DIR=$PWD/a python -m cronctl run -f s.toml --now 2026-08-03T10:00:00Z --json > a.json 2> a.err &
APID=$!
sleep 5
echo "$(ts) stopping PostgreSQL for 120 s"; $PGCTL -m fast stop >/dev/null
sleep 25
echo "$(ts) B at 10:01 (store down):"; CRONCTL_HOST=b CRONCTL_STATE_DIR=$PWD/b python -m cronctl run -f s.toml --now 2026-08-03T10:01:00Z --json; echo "rc=$?"
sleep 60
echo "$(ts) B at 10:02 (store down):"; CRONCTL_HOST=b CRONCTL_STATE_DIR=$PWD/b python -m cronctl run -f s.toml --now 2026-08-03T10:02:00Z --json 2>/dev/null; echo "rc=$?"
sleep 30
echo "$(ts) starting PostgreSQL"; $PGCTL -o "-k $PGSOCK -c listen_addresses=''" start >/dev/null
sleep 3
echo "$(ts) holders:"; psql -h $PGSOCK -U postgres -d twomin -Atc "select host, backend, seen from cronctl.holders"
echo "$(ts) B at 10:03 (store back):"; CRONCTL_HOST=b CRONCTL_STATE_DIR=$PWD/b python -m cronctl run -f s.toml --now 2026-08-03T10:03:00Z --json; echo "rc=$?"
wait $APID; echo "$(ts) A ended rc=$?"; cat a.json; cat a.err
echo "$(ts) fleet history:"; CRONCTL_HOST=b CRONCTL_STATE_DIR=$PWD/b python -m cronctl history --fleet -f s.toml
echo "finished: $(cat finished 2>/dev/null)"
