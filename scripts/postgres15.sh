#!/usr/bin/env bash
# A plain PostgreSQL 15, the oldest release the program supports (README: DATABASE_URL "15 or later"),
# for running the test suite on it (`npm run test:pg15`); the suite otherwise runs on the embedded 18.
#
#   scripts/postgres15.sh start DIR [PORT]   a new cluster in DIR (made if missing) on PORT or the first free
#                                            port from it (default 9800), 127.0.0.1 only, trust authentication;
#                                            prints DATABASE_URL=... last
#   scripts/postgres15.sh stop DIR           stop it (rm -rf DIR drops it)
#   scripts/postgres15.sh run CMD [ARG]...   start one in a temporary folder, run CMD with DATABASE_URL set,
#                                            stop it and remove the folder, whatever CMD does; CMD's status
#
# The binaries are Debian's package postgresql-15 (POSTGRES15_BIN to use others): installed with apt-get when
# missing and running as root. As root the cluster runs as the user postgres (initdb refuses root), and its
# folder is made where that user can reach it.
set -euo pipefail
bin=${POSTGRES15_BIN:-/usr/lib/postgresql/15/bin}

install() {
  [ -x "$bin/postgres" ] && return
  if [ "$(id -u)" != 0 ]; then
    echo "PostgreSQL 15 is not in $bin and only root can install it (apt-get install postgresql-15), or set POSTGRES15_BIN" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15 >/dev/null
}

# As the user postgres when root, else as the caller.
as_owner() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() {
  local dir=$1 port=${2:-9800}
  install
  mkdir -p "$dir"
  if [ "$(id -u)" = 0 ]; then
    chown postgres "$dir"
    as_owner test -w "$dir" || { echo "the user postgres cannot reach $dir: choose a folder whose parents it may enter" >&2; exit 1; }
  fi
  chmod 700 "$dir"
  while port_taken "$port"; do port=$((port + 1)); done
  if [ ! -f "$dir/data/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C.UTF-8 >/dev/null
  fi
  # The port and socket folder on the command line, so that a cluster kept in DIR can start on another port.
  as_owner "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w \
    -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=200 ${PG15_EXTRA_OPTIONS:-}" start >/dev/null
  echo "DATABASE_URL=postgres://postgres@127.0.0.1:$port/postgres"
}

stop() {
  local dir=$1
  [ -f "$dir/data/postmaster.pid" ] && as_owner "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null || true
}

run_dir=
cleanup() { [ -z "$run_dir" ] || { stop "$run_dir/cluster"; rm -rf "$run_dir"; }; }

run() {
  local url status=0
  run_dir=$(mktemp -d "${TMPDIR:-/tmp}/audience-pg15-XXXXXX")
  # mktemp's folder is the caller's, mode 0700; the cluster's owner needs to enter it.
  chmod 755 "$run_dir"
  trap cleanup EXIT
  # A cluster for one run only: no flushes to survive a machine crash (fsync, full pages), which
  # made the tests' many databases slow to create and fill; a killed server still recovers.
  url=$(PG15_EXTRA_OPTIONS="-c fsync=off -c full_page_writes=off" start "$run_dir/cluster" | tail -1)
  echo "PostgreSQL 15 for this run: ${url#DATABASE_URL=}"
  DATABASE_URL=${url#DATABASE_URL=} "$@" || status=$?
  return "$status"
}

case "${1:-}" in
  start) [ -n "${2:-}" ] || { echo "usage: $0 start DIR [PORT]" >&2; exit 2; }; start "$2" "${3:-9800}" ;;
  stop) [ -n "${2:-}" ] || { echo "usage: $0 stop DIR" >&2; exit 2; }; stop "$2" ;;
  run) [ -n "${2:-}" ] || { echo "usage: $0 run CMD [ARG]..." >&2; exit 2; }; shift; run "$@" ;;
  *) echo "usage: $0 start DIR [PORT] | stop DIR | run CMD [ARG]..." >&2; exit 2 ;;
esac
