import type { ApiKeys } from '../api-keys/api-keys.ts';
import type { AccountScope } from '../core/scope.ts';
import { requireAllSections } from '../definitions/definitions.ts';
import type { Queryable } from '../store/pool.ts';
import { storedKind } from './kinds.ts';
import * as q from './queries.ts';
import { singleExportUrl } from './single.ts';

/**
 * The account's newest exports of every kind, for the console: each with its status (a ready one
 * past its day is expired) and where it is read: `poll_path`, the v2 poll of a file or count, the
 * status route of an email event export, the data URL's path of a single profile export.
 */
export async function listExports(
  db: Queryable,
  scope: AccountScope,
  limit: number,
  keys: Pick<ApiKeys, 'listApiKeys'>,
) {
  // The requests of exports name any section: only a key of every section sees them.
  requireAllSections(scope, 'listing exports');
  const rows = await q.listExports(db, scope.accountId, limit);
  const keyNames = new Map((await keys.listApiKeys(db, scope.accountId)).map((k) => [k.client_id, k.name]));
  return rows.map((row) => {
    const readAt = storedKind(row.kind)?.readAt;
    const expired = row.status === 'ready' && row.expires_at !== null && row.expires_at <= scope.now;
    return {
      export_id: row.export_id,
      kind: row.kind,
      status: expired ? ('expired' as const) : row.status,
      ...(row.message === null ? {} : { message: row.message }),
      ...(row.result === null ? {} : { result: row.result }),
      request: row.request as Record<string, unknown>,
      created_at: row.created_at.toISOString(),
      ready_at: row.ready_at?.toISOString() ?? null,
      expires_at: row.expires_at?.toISOString() ?? null,
      rows: row.row_count,
      // A deleted key's name is gone: its client id stays.
      requested_by:
        row.requested_by === null ? null : { client_id: row.requested_by, name: keyNames.get(row.requested_by) ?? '' },
      poll_path:
        readAt === 'emails'
          ? `/emails/reports/${row.export_id}`
          : readAt === 'single'
            ? singleExportUrl('', scope.accountId, row.export_id)
            : `/v2/audience/profiles/reports/${row.export_id}`,
    };
  });
}
