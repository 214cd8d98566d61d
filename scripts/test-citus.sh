#!/usr/bin/env bash
# npm run test:citus: the integration tests that go through HTTP, against a Citus cluster of a
# coordinator and two workers on loopback (scripts/citus.sh), with DATABASE_URL at the coordinator.
# Every statement the service runs must stay on one node: the service's connections set
# citus.multi_task_query_log_level=error (test/app.ts), so a statement that Citus would split over
# several shards fails its test. A spare node (NODE_URL) is there for the rebalance test.
# test/dump-hops.test.ts starts an embedded PostgreSQL 18 and a PostgreSQL 15 of its own besides.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! bash scripts/citus.sh available; then
  echo "test:citus skipped: no Citus cluster can be started here (needs root and the cluster script, scripts/citus.sh)"
  exit 0
fi
port=${CITUS_PORT:-9750}
dir=$(mktemp -d /tmp/audience-citus-XXXXXX)
chmod 755 "$dir"
trap 'bash scripts/citus.sh down "$dir/cluster"; bash scripts/citus.sh down "$dir/spare"; rm -rf "$dir"' EXIT
eval "$(bash scripts/citus.sh up "$dir/cluster" 2 "$port" | grep '^DATABASE_URL=')"
eval "$(bash scripts/citus.sh spare "$dir/spare" $((port + 10)) | grep '^NODE_URL=')"
export DATABASE_URL CITUS_SPARE_NODE_URL=$NODE_URL AUDIENCE_TEST_SINGLE_SHARD=1
# Nodes for this run only: no flushes to survive a machine crash (as scripts/postgres15.sh run).
for url in "$DATABASE_URL" "$NODE_URL" $(psql -qAt "$DATABASE_URL" -c "select 'postgres://postgres@' || nodename || ':' || nodeport || '/postgres' from pg_dist_node where groupid <> 0"); do
  psql -qAt "$url" -c 'alter system set fsync = off' -c 'alter system set full_page_writes = off' -c 'select pg_reload_conf()' >/dev/null
done
if [ $# -gt 0 ]; then
  npx vitest run "$@"
  exit
fi
# Arguments are file filters: test/section-access and test/section-operations name the section access tests.
npx vitest run src/accounts src/profiles src/consents src/segments src/imports src/exports src/activities \
  src/transactional src/webhooks test/event-writers.test.ts test/section-access test/section-operations test/end-to-end.test.ts test/distribution.test.ts \
  test/dump.test.ts test/dump-hops.test.ts
# The cluster tests after the others: a rebalance connects the nodes to each other, and with the
# other files' servers running beside it the coordinator ran out of connections (too many clients).
npx vitest run test/citus.test.ts
