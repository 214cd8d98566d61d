import type pg from 'pg';
import type { Expression } from '../aql/ast.ts';
import { SqlValues } from '../aql/compile-sql.ts';
import { checkTimeZone } from '../aql/time.ts';
import type { SectionDefs } from '../core/definitions.ts';
import type { AccountScope } from '../core/scope.ts';
import { sectionOf } from '../definitions/definitions.ts';
import { chosenQuery, knownProfileSql } from '../segments/segments.ts';
import {
  EXPORT_KEY_COLUMN,
  type ExportFile,
  planAttributes,
  planTags,
  profileSelection,
  requireDistinct,
} from './plans.ts';
import * as q from './queries.ts';
import type { SegmentExportBody } from './schemas.ts';

/** The profile in segment export, beta (SPEC §4.7; docs/exports.md): the profiles of one segment, known, unknown or all. */

export interface SegmentExportPlan {
  section: SectionDefs;
  expression: Expression;
  timeZone: string;
  known: boolean | null;
  attributes: { column: string; versionId: string }[];
  tags: { column: string; tagId: string }[];
  limit: number | null;
}

/** Checks a profile in segment export request against the definitions. */
export function planSegmentExport(scope: AccountScope, body: SegmentExportBody): SegmentExportPlan {
  const section = sectionOf(scope, body.section_discriminator);
  const timeZone = checkTimeZone(body.segment.timezone, 'segment.timezone');
  const { expression } = chosenQuery(scope.defs, body.segment);
  const attributes = planAttributes(section, body.attributes);
  const tags = planTags(section, body.tags);
  requireDistinct([
    [EXPORT_KEY_COLUMN, 'the export key'],
    ...attributes.map((a, i): [string, string] => [a.column, `attributes[${i}].field_name`]),
    ...tags.map((t, i): [string, string] => [t.column, `tags[${i}].field_name`]),
  ]);
  return {
    section,
    expression,
    timeZone,
    known: body.known_profiles ?? null,
    attributes,
    tags,
    limit: body.limit ?? null,
  };
}

/** The file of a profile in segment export: its header and its rows, streamed from the database. */
export function segmentExportFile(pool: pg.Pool, scope: AccountScope, plan: SegmentExportPlan): ExportFile {
  const values = new SqlValues();
  const base = profileSelection(
    scope,
    values,
    {
      section: plan.section,
      topicIds: [],
      channels: [],
      segments: [{ name: 'segment', expression: plan.expression }],
      timeZone: plan.timeZone,
      filter: { kind: 'name', name: 'segment' },
    },
    plan,
  );
  const { known } = plan;
  const selection = {
    ...base,
    known:
      known === null
        ? null
        : (profile: string) => knownProfileSql(scope, values, { account: base.account, profile, wanted: known }),
  };
  return {
    columns: [EXPORT_KEY_COLUMN, ...plan.attributes.map((a) => a.column), ...plan.tags.map((t) => t.column)],
    rows: q.segmentExportCsv(pool, values, selection),
  };
}
