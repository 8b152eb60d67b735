#!/usr/bin/env bash
# Local object-store servers for sluice's end-to-end storage tests: an S3
# server (versitygw over a directory), a GCS emulator (fake-gcs-server) and an
# Azure Blob emulator (Azurite), each on 127.0.0.1 only.
#
#   bash scripts/objectstores.sh start    # install once, start, wait; prints `export` lines
#   bash scripts/objectstores.sh env      # prints the `export` lines again
#   bash scripts/objectstores.sh stop     # stops what start started, removes its data
#   bash scripts/objectstores.sh install  # only builds or downloads the servers
#   bash scripts/objectstores.sh status   # exit status 0 if all three are running
#
# Typical use:  eval "$(bash scripts/objectstores.sh start)"; go test ./...; bash scripts/objectstores.sh stop
#
# The servers are built (Go) or downloaded (npm) once into the tool cache and
# never rebuilt while their pinned version is there. Their data lives in a
# state directory that stop removes. Everything is overridable:
#   SLUICE_TOOLS_CACHE        tool cache (default ${XDG_CACHE_HOME:-$HOME/.cache}/sluice-tools)
#   SLUICE_OBJECTSTORES_DIR   state: PID files, logs, data (default ${TMPDIR:-/tmp}/sluice-objectstores-UID)
#   SLUICE_S3_PORT, SLUICE_GCS_PORT, SLUICE_AZURE_PORT   (default 19100, 19101, 19102)
#   SLUICE_OBJECTSTORES_WAIT  seconds to wait for each server to answer (default 90)
#
# The credentials below are test-only values for servers that listen on
# loopback; the Azure key is Azurite's published development key.
set -euo pipefail

# Pinned rather than @latest: the cache is keyed by version, so a new upstream
# release cannot turn a warm cache cold (or break CI) by itself.
VERSITYGW_VERSION=v1.8.0
FAKE_GCS_VERSION=v1.56.1
AZURITE_VERSION=3.37.0

CACHE="${SLUICE_TOOLS_CACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/sluice-tools}"
STATE="${SLUICE_OBJECTSTORES_DIR:-${TMPDIR:-/tmp}/sluice-objectstores-$(id -u)}"
S3_PORT="${SLUICE_S3_PORT:-19100}"
GCS_PORT="${SLUICE_GCS_PORT:-19101}"
AZURE_PORT="${SLUICE_AZURE_PORT:-19102}"
WAIT="${SLUICE_OBJECTSTORES_WAIT:-90}"

BUCKET=sluice-test
S3_ACCESS=sluicetestaccess
S3_SECRET=sluice-test-secret-7c2f9a41
AZURE_ACCOUNT=devstoreaccount1
AZURE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

VERSITYGW="$CACHE/versitygw-$VERSITYGW_VERSION/versitygw"
FAKE_GCS="$CACHE/fake-gcs-server-$FAKE_GCS_VERSION/fake-gcs-server"
AZURITE_DIR="$CACHE/azurite-$AZURITE_VERSION"
AZURITE="$AZURITE_DIR/node_modules/.bin/azurite-blob"

say() { echo "objectstores: $*" >&2; }
die() { say "error: $*"; exit 1; }

# go_tool installs a Go main package into its own versioned folder. GOBIN
# points at a scratch folder renamed into place only after a successful
# build, so an interrupted build never leaves a binary that looks cached.
go_tool() {
	local bin=$1 pkg=$2
	[ -x "$bin" ] && return 0
	command -v go >/dev/null || die "go is not on PATH: needed to build $pkg"
	local dir tmp start
	dir=$(dirname "$bin")
	tmp="$dir.tmp.$$"
	rm -rf "$tmp"
	start=$SECONDS
	say "building $pkg (once; cached in $dir)"
	if ! GOBIN="$tmp" GOFLAGS=-buildvcs=false go install "$pkg" >&2; then
		rm -rf "$tmp"
		die "go install $pkg failed"
	fi
	rm -rf "$dir"
	mv "$tmp" "$dir"
	say "built $(basename "$bin") in $((SECONDS - start))s"
}

npm_azurite() {
	[ -x "$AZURITE" ] && return 0
	command -v npm >/dev/null || die "npm is not on PATH: needed to install azurite"
	local tmp="$AZURITE_DIR.tmp.$$" start=$SECONDS
	rm -rf "$tmp"
	mkdir -p "$tmp"
	say "installing azurite@$AZURITE_VERSION from npm (once; cached in $AZURITE_DIR)"
	if ! (cd "$tmp" && npm install --no-audit --no-fund --no-update-notifier --loglevel=error \
		"azurite@$AZURITE_VERSION" >&2); then
		rm -rf "$tmp"
		die "npm install azurite@$AZURITE_VERSION failed"
	fi
	rm -rf "$AZURITE_DIR"
	mv "$tmp" "$AZURITE_DIR"
	say "installed azurite in $((SECONDS - start))s"
}

install() {
	mkdir -p "$CACHE"
	# Two runs sharing a cache (a developer's shell and CI) must not build
	# into the same folder at once.
	exec 9>"$CACHE/.lock"
	flock 9
	# npm mostly waits on the network: let it overlap the Go builds.
	local npm_pid="" npm_log="$CACHE/.npm-install.log"
	if [ ! -x "$AZURITE" ]; then
		npm_azurite 2>"$npm_log" &
		npm_pid=$!
	fi
	go_tool "$VERSITYGW" "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
	go_tool "$FAKE_GCS" "github.com/fsouza/fake-gcs-server@$FAKE_GCS_VERSION"
	if [ -n "$npm_pid" ]; then
		if ! wait "$npm_pid"; then
			cat "$npm_log" >&2
			die "azurite install failed"
		fi
		cat "$npm_log" >&2
	fi
	# Closed, not only unlocked, so the servers started next do not inherit it.
	exec 9>&-
}

# alive NAME: the process that start recorded for NAME is still running. The
# command line is checked too, so a recycled PID is not mistaken for ours.
alive() {
	local pidfile="$STATE/$1.pid" pid
	[ -f "$pidfile" ] || return 1
	pid=$(cat "$pidfile")
	[ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q -- "$2"
}

answers() { # answers URL: anything at all answers at URL (an HTTP status, even 4xx)
	local code
	code=$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" 2>/dev/null) || true
	[ -n "$code" ] && [ "$code" != 000 ]
}

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# launch NAME PORT MARKER CMD...: starts CMD in the background with its output
# in NAME.log, unless our NAME is already running.
launch() {
	local name=$1 port=$2 marker=$3
	shift 3
	if alive "$name" "$marker"; then
		say "$name already running (pid $(cat "$STATE/$name.pid")) on port $port"
		return 0
	fi
	if port_taken "$port"; then
		die "port $port on 127.0.0.1 is taken by another program: set SLUICE_${name^^}_PORT to a free port"
	fi
	# No stdin, and stdout away from the caller: `eval "$(... start)"` waits
	# for every holder of its pipe to close it.
	nohup "$@" </dev/null >"$STATE/$name.log" 2>&1 &
	echo $! >"$STATE/$name.pid"
	date +%s%N >"$STATE/started"
}

wait_ready() { # wait_ready NAME MARKER URL
	local name=$1 marker=$2 url=$3 deadline=$((SECONDS + WAIT))
	until answers "$url"; do
		if ! alive "$name" "$marker"; then
			tail -n 30 "$STATE/$name.log" >&2 || true
			die "$name exited before answering at $url (log above, in $STATE/$name.log)"
		fi
		if ((SECONDS >= deadline)); then
			tail -n 30 "$STATE/$name.log" >&2 || true
			die "$name did not answer at $url within ${WAIT}s (log above; raise SLUICE_OBJECTSTORES_WAIT if the machine is slow)"
		fi
		sleep 0.3
	done
}

# SLUICE_OBJECTSTORES_STARTED changes whenever a server is (re)started. The
# tests read it so that go test's result cache, which knows nothing of
# servers, never passes off a result obtained from servers since stopped.
print_env() {
	local started
	started=$(cat "$STATE/started" 2>/dev/null || echo none)
	cat <<EOF
export SLUICE_OBJECTSTORES_STARTED='$started'
export SLUICE_TEST_S3_URL='s3://$BUCKET?endpoint=http://127.0.0.1:$S3_PORT&region=us-east-1&use_path_style=true&disable_https=true'
export AWS_ACCESS_KEY_ID='$S3_ACCESS'
export AWS_SECRET_ACCESS_KEY='$S3_SECRET'
export SLUICE_TEST_GCS_URL='gs://$BUCKET'
export STORAGE_EMULATOR_HOST='127.0.0.1:$GCS_PORT'
export SLUICE_TEST_AZURE_URL='azblob://$BUCKET?domain=127.0.0.1:$AZURE_PORT&protocol=http'
export AZURE_STORAGE_ACCOUNT='$AZURE_ACCOUNT'
export AZURE_STORAGE_KEY='$AZURE_KEY'
EOF
}

start() {
	command -v curl >/dev/null || die "curl is not on PATH: needed to wait for the servers"
	install
	mkdir -p "$STATE/s3" "$STATE/gcs" "$STATE/azure"
	# --keep-alive: reuse connections as clients of real S3 do; versitygw
	# otherwise closes each one after a response.
	launch s3 "$S3_PORT" versitygw \
		"$VERSITYGW" --access "$S3_ACCESS" --secret "$S3_SECRET" --region us-east-1 \
		--port "127.0.0.1:$S3_PORT" --keep-alive --quiet posix "$STATE/s3"
	launch gcs "$GCS_PORT" fake-gcs-server \
		"$FAKE_GCS" -scheme http -host 127.0.0.1 -port "$GCS_PORT" -public-host "127.0.0.1:$GCS_PORT" \
		-backend filesystem -filesystem-root "$STATE/gcs" -log-level warn
	# --skipApiVersionCheck: the Go SDK speaks a newer API version than an
	# Azurite release knows. --disableTelemetry: no network but loopback.
	launch azure "$AZURE_PORT" azurite \
		"$AZURITE" --blobHost 127.0.0.1 --blobPort "$AZURE_PORT" --location "$STATE/azure" \
		--skipApiVersionCheck --disableTelemetry --silent
	wait_ready s3 versitygw "http://127.0.0.1:$S3_PORT/"
	wait_ready gcs fake-gcs-server "http://127.0.0.1:$GCS_PORT/storage/v1/b"
	wait_ready azure azurite "http://127.0.0.1:$AZURE_PORT/$AZURE_ACCOUNT?comp=list"
	say "S3 (versitygw) on 127.0.0.1:$S3_PORT, GCS (fake-gcs-server) on 127.0.0.1:$GCS_PORT, Azure (Azurite) on 127.0.0.1:$AZURE_PORT; state in $STATE"
	print_env
}

status() { # status: exit 0 if all three servers that start records are running
	alive s3 versitygw && alive gcs fake-gcs-server && alive azure azurite
}

stop() {
	local name pid marker
	for name in s3 gcs azure; do
		case $name in s3) marker=versitygw ;; gcs) marker=fake-gcs-server ;; azure) marker=azurite ;; esac
		if alive "$name" "$marker"; then
			pid=$(cat "$STATE/$name.pid")
			kill "$pid" 2>/dev/null || true
			for _ in $(seq 50); do
				alive "$name" "$marker" || break
				sleep 0.1
			done
			if alive "$name" "$marker"; then
				kill -9 "$pid" 2>/dev/null || true
			fi
			say "stopped $name (pid $pid)"
		fi
		rm -f "$STATE/$name.pid"
	done
	rm -rf "$STATE"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
env) print_env ;;
install) install ;;
status) status ;;
*)
	echo "usage: $0 start|stop|env|install|status" >&2
	exit 2
	;;
esac
