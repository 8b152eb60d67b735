#!/usr/bin/env bash
# A throwaway PostgreSQL server for sluice's Iceberg SQL-catalog tests, from
# Debian's postgresql package, listening on 127.0.0.1 only.
#
#   bash scripts/postgres.sh start    # install if missing, init, start, wait; prints `export` lines
#   bash scripts/postgres.sh env      # prints the `export` lines again
#   bash scripts/postgres.sh stop     # stops what start started, removes its data
#   bash scripts/postgres.sh status   # exit status 0 if it is running
#
# Typical use:
#   eval "$(bash scripts/postgres.sh start)"; go test ./formats/iceberg/ -run Postgres; bash scripts/postgres.sh stop
#
# The tests read SLUICE_POSTGRES_DSN and skip without it. Overridable:
#   SLUICE_POSTGRES_DIR   state: data directory, socket, log (default ${TMPDIR:-/tmp}/sluice-postgres-UID)
#   SLUICE_POSTGRES_PORT  (default 19110)
#   SLUICE_POSTGRES_WAIT  seconds to wait for the server to answer (default 60)
#
# PostgreSQL refuses to run as root: as root, the server runs as the
# package's postgres user. The password is a test-only value for a server
# on loopback.
set -euo pipefail

STATE="${SLUICE_POSTGRES_DIR:-${TMPDIR:-/tmp}/sluice-postgres-$(id -u)}"
PORT="${SLUICE_POSTGRES_PORT:-19110}"
WAIT="${SLUICE_POSTGRES_WAIT:-60}"
USER_NAME=sluice
PASSWORD=sluice-test-3e1d
DB=sluice

say() { echo "postgres: $*" >&2; }
die() { say "error: $*"; exit 1; }

bindir() {
	local d
	for d in /usr/lib/postgresql/*/bin; do
		[ -x "$d/pg_ctl" ] && { echo "$d"; return 0; }
	done
	return 1
}

install() {
	bindir >/dev/null && return 0
	command -v apt-get >/dev/null || die "no PostgreSQL and no apt-get to install Debian's postgresql"
	say "installing Debian's postgresql"
	local sudo=""
	[ "$(id -u)" -ne 0 ] && sudo=sudo
	$sudo apt-get install -y --no-install-recommends postgresql >&2
	bindir >/dev/null || die "postgresql installed, but no pg_ctl found under /usr/lib/postgresql"
}

# as runs a command as the server's owner.
as() {
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

dsn() { echo "postgres://$USER_NAME:$PASSWORD@127.0.0.1:$PORT/$DB?sslmode=disable"; }

print_env() { echo "export SLUICE_POSTGRES_DSN='$(dsn)'"; }

running() {
	local bin
	bin=$(bindir) || return 1
	[ -f "$STATE/data/postmaster.pid" ] && as "$bin/pg_ctl" -D "$STATE/data" status >/dev/null 2>&1
}

start() {
	install
	local bin
	bin=$(bindir)
	if running; then
		print_env
		return 0
	fi
	mkdir -p "$STATE"
	[ "$(id -u)" -eq 0 ] && chown postgres "$STATE"
	if [ ! -f "$STATE/data/PG_VERSION" ]; then
		local pw="$STATE/pw"
		echo "$PASSWORD" >"$pw"
		[ "$(id -u)" -eq 0 ] && chown postgres "$pw"
		as "$bin/initdb" -D "$STATE/data" -U "$USER_NAME" --pwfile="$pw" -A scram-sha-256 >"$STATE/initdb.log" 2>&1 ||
			die "initdb failed: $(tail -5 "$STATE/initdb.log")"
		rm -f "$pw"
	fi
	as "$bin/pg_ctl" -D "$STATE/data" -l "$STATE/server.log" -w -t "$WAIT" \
		-o "-c listen_addresses=127.0.0.1 -p $PORT -k $STATE" start >&2 ||
		die "the server did not start: $(tail -5 "$STATE/server.log")"
	if ! PGPASSWORD=$PASSWORD psql -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname='$DB'" | grep -q 1; then
		PGPASSWORD=$PASSWORD psql -h 127.0.0.1 -p "$PORT" -U "$USER_NAME" -d postgres -qc "CREATE DATABASE $DB" >&2
	fi
	say "running on 127.0.0.1:$PORT"
	print_env
}

stop() {
	local bin
	if bin=$(bindir) && [ -f "$STATE/data/postmaster.pid" ]; then
		as "$bin/pg_ctl" -D "$STATE/data" -m fast -w stop >&2 || true
	fi
	rm -rf "$STATE"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
env) print_env ;;
status) running ;;
install) install ;;
*)
	sed -n '2,20p' "$0" >&2
	exit 2
	;;
esac
