#!/usr/bin/env bash
# The project's way to a Citus cluster for its tests and benchmarks (docs/scaling.md). It calls the
# workplace's cluster script (Debian's PostgreSQL 15 with Citus built from source; the program itself
# never needs it: a user gets Citus from its packages or images), found at CITUS_CLUSTER_SH or beside
# this checkout at ../shared/citus/cluster.sh.
#
#   scripts/citus.sh available            exit 0 when a cluster can be started here (the script, and root)
#   scripts/citus.sh up DIR [WORKERS] [PORT]
#                                         start a coordinator and WORKERS workers (2) with wal_level=logical
#                                         (shard moves by logical replication), print DATABASE_URL=…
#   scripts/citus.sh spare DIR PORT       start one more node with the citus extension, not yet in a cluster
#   scripts/citus.sh plain DIR PORT       one plain PostgreSQL 15 (no Citus), for comparisons; prints DATABASE_URL=…
#   scripts/citus.sh down DIR             stop the nodes under DIR and remove DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cluster=${CITUS_CLUSTER_SH:-$root/../shared/citus/cluster.sh}
pgbin=/usr/lib/postgresql/15/bin

available() { [ -f "$cluster" ] && [ "$(id -u)" = 0 ]; }

# Shard moves copy a shard and follow its writes by logical replication, which needs wal_level=logical.
# Every database with the citus extension holds a background worker (its maintenance daemon), and a
# rebalance takes more (its task executors, the logical replication workers): the tests' many
# databases would use up PostgreSQL's 8 background workers, and a rebalance would wait forever.
SETTINGS=('wal_level = logical' 'max_worker_processes = 128')
logical() {
  local dir=$1 d setting changed=no
  for d in "$dir"/node*/; do
    for setting in "${SETTINGS[@]}"; do
      if ! grep -qxF "$setting" "$d/postgresql.conf"; then
        echo "$setting" >>"$d/postgresql.conf"
        changed=yes
      fi
    done
  done
  if [ "$changed" = yes ]; then
    # -l: the node logs to DIR/nodeN.log again, as cluster.sh started it; without it the restarted
    # node's log went to pg_ctl's output, here /dev/null.
    for d in "$dir"/node*/; do runuser -u postgres -- "$pgbin/pg_ctl" -D "$d" -l "${d%/}.log" -w restart -m fast >/dev/null; done
  fi
}

case "${1:-}" in
  available) available ;;
  up)
    available || { echo "no Citus cluster here: needs root and $cluster" >&2; exit 1; }
    dir=$2
    bash "$cluster" up "$dir" "${3:-2}" "${4:-9700}" >/dev/null
    logical "$dir"
    echo "DATABASE_URL=postgres://postgres@127.0.0.1:${4:-9700}/postgres"
    ;;
  spare)
    available || { echo "no Citus cluster here: needs root and $cluster" >&2; exit 1; }
    bash "$cluster" up "$2" 0 "$3" >/dev/null
    logical "$2"
    echo "NODE_URL=postgres://postgres@127.0.0.1:$3/postgres"
    ;;
  plain)
    available || { echo "no PostgreSQL 15 here: needs root and $cluster" >&2; exit 1; }
    bash "$cluster" plain "$2" "$3"
    ;;
  down)
    [ -f "$cluster" ] && bash "$cluster" down "$2" || true
    rm -rf "$2"
    ;;
  *) echo "usage: $0 available | up DIR [WORKERS] [PORT] | spare DIR PORT | plain DIR PORT | down DIR" >&2; exit 2 ;;
esac
