import type { Expression } from '../aql/ast.ts';
import { SqlValues } from '../aql/compile-sql.ts';
import { checkTimeZone } from '../aql/time.ts';
import type { AccountScope } from '../core/scope.ts';
import { sectionOf } from '../definitions/definitions.ts';
import { chosenQuery, knownProfileSql } from '../segments/segments.ts';
import { copyCsvRows } from '../store/copy.ts';
import { CSV_TYPE, JSON_TYPE, XLSX_TYPE } from './formats.ts';
import type { ExportKind, Statement } from './kind.ts';
import { EXPORT_KEY_COLUMN, planAttributes, planTags, profileSelection, requireDistinct } from './plans.ts';
import * as q from './queries.ts';
import { SegmentExportBody } from './schemas.ts';

/** The profile in segment export, beta (SPEC §4.7; docs/exports.md): the profiles of one segment, known, unknown or all. */

export interface SegmentExportPlan {
  sectionId: string;
  expression: Expression;
  timeZone: string;
  known: boolean | null;
  attributes: { column: string; versionId: string }[];
  tags: { column: string; tagId: string }[];
  limit: number | null;
}

/** Checks a profile in segment export request against the definitions. */
function planSegmentExport(scope: AccountScope, body: SegmentExportBody): SegmentExportPlan {
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
    sectionId: section.id,
    expression,
    timeZone,
    known: body.known_profiles ?? null,
    attributes,
    tags,
    limit: body.limit ?? null,
  };
}

/** The statement of a profile in segment export's rows. */
function segmentExportStatement(scope: AccountScope, plan: SegmentExportPlan): Statement {
  const values = new SqlValues();
  const base = profileSelection(
    scope,
    values,
    {
      sectionId: plan.sectionId,
      topicIds: [],
      channels: [],
      segments: [{ name: 'segment', expression: plan.expression }],
      timeZone: plan.timeZone,
      filter: { kind: 'name', name: 'segment' },
    },
    plan,
  );
  const { known } = plan;
  const text = q.segmentExportStatement(values, {
    ...base,
    known:
      known === null
        ? null
        : (profile: string) => knownProfileSql(scope, values, { account: base.account, profile, wanted: known }),
  });
  return { text, values: values.values };
}

/** The profile in segment export: a CSV file of its segment's profiles (also sent as JSON). */
export const segmentExport: ExportKind<SegmentExportBody, SegmentExportPlan> = {
  body: SegmentExportBody,
  readAt: 'reports',
  file: { extension: 'csv', types: [CSV_TYPE, XLSX_TYPE, JSON_TYPE] },
  plan: planSegmentExport,
  statement: segmentExportStatement,
  async produce(pool, scope, plan) {
    return {
      file: {
        columns: [EXPORT_KEY_COLUMN, ...plan.attributes.map((a) => a.column), ...plan.tags.map((t) => t.column)],
        rows: copyCsvRows(pool, segmentExportStatement(scope, plan)),
      },
    };
  },
};
