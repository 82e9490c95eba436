#!/usr/bin/env bash
# bench.sh: berm serve replicas on PostgreSQL behind nginx, next to one
# replica on the embedded root, in one run (see main.go beside it for what is
# measured and how). It builds berm, starts a private PostgreSQL cluster on a
# Unix socket in a temporary directory (as the postgres user when run as root,
# since PostgreSQL refuses root) with pg_stat_statements loaded, which counts
# the statements each call sends, and removes it all at the end. Extra
# arguments go to the benchmark (-clients, -rounds, -duration, -deploys).
#
#   bash deploy/bench/bench.sh          # or: make bench-replicas
set -euo pipefail
cd "$(dirname "$0")/../.."
export CGO_ENABLED=0

pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
if [ -z "$pgbin" ] || [ ! -x "$pgbin/initdb" ]; then
	echo "bench.sh: PostgreSQL is not installed (apt-get install postgresql)" >&2
	exit 2
fi
if [ ! -x /usr/sbin/nginx ]; then
	echo "bench.sh: nginx is not installed (apt-get install nginx)" >&2
	exit 2
fi

work=$(mktemp -d)
chmod 755 "$work"
as_pg=()
if [ "$(id -u)" = 0 ]; then
	as_pg=(runuser -u postgres --)
fi
cleanup() {
	if [ -f "$work/pg/postmaster.pid" ]; then
		"${as_pg[@]}" "$pgbin/pg_ctl" -D "$work/pg" -m immediate stop >/dev/null 2>&1 || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT

mkdir "$work/pg" "$work/sock"
if [ "$(id -u)" = 0 ]; then
	chown postgres "$work/pg" "$work/sock"
fi
"${as_pg[@]}" "$pgbin/initdb" -D "$work/pg" -U postgres -A trust --no-sync >/dev/null
# No TCP listener: the socket in $work is the cluster's only way in, so no
# port is taken from anyone. fsync stays on: a write is what it costs.
"${as_pg[@]}" "$pgbin/pg_ctl" -D "$work/pg" -l "$work/pg/server.log" -w \
	-o "-c listen_addresses='' -k $work/sock -c shared_preload_libraries=pg_stat_statements" \
	start >/dev/null
"${as_pg[@]}" "$pgbin/createdb" -h "$work/sock" -U postgres berm

go build -o "$work/berm" .
go build -o "$work/bench" ./deploy/bench
"$work/bench" -berm "$work/berm" -state "postgres:///berm?host=$work/sock&user=postgres" -testdata testdata "$@"
