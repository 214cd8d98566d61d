import crypto from 'node:crypto';
import { stringify } from 'csv-stringify/sync';
import type { Readable } from 'node:stream';
import type { Expression } from '../aql/ast.ts';
import { compilePredicate, SqlValues } from '../aql/compile-sql.ts';
import { checkTimeZone, TIME_ZONE_PROBLEMS } from '../aql/time.ts';
import { emailEventsSql } from '../activities/activities.ts';
import { ATTRIBUTE_READ_PROBLEMS } from '../core/definitions.ts';
import { Problem, type ProblemCode } from '../core/problems.ts';
import type { AccountScope } from '../core/scope.ts';
import { requireAllSections, SECTION_PROBLEMS } from '../definitions/definitions.ts';
import type { FileStore } from '../files/store.ts';
import { currentVersionId } from '../profiles/locate.ts';
import { segmentExpression } from '../segments/segments.ts';
import type { Queryable } from '../store/pool.ts';
import { FIRST_SOURCE_TIME } from './events.ts';
import { CSV_TYPE } from './formats.ts';
import type { ExportKind, Statement } from './kind.ts';
import { requireAttributeVersion, requireDistinct, sectionAt, visibleTag } from './plans.ts';
import * as q from './queries.ts';
import { EmailEventExportBody, type EmailReportStatus } from './schemas.ts';

/**
 * The email event export (SPEC §2.16, §3.3, §4.8; docs/activities.md "The email event export
 * file"): the events of email activities in a window of at most three months, as a
 * gzip-compressed CSV written by the export job, its status at `/emails/reports/{id}`, and its
 * file at a URL that each status call issues afresh, valid for a short while, carrying its own
 * credential or (header_auth) needing one sent in a request header.
 */

/** The default columns of SPEC §2.16, in order. */
export const EMAIL_EVENT_COLUMNS = [
  'activity_id',
  'split_id',
  'activity_name',
  'split_activity_name',
  'sender',
  'subject',
  'address',
  'variation',
  'type',
  'correlation_id',
  'event_time',
  'server_time',
  'device',
  'location',
  'link_id',
  'link_url',
  'link_title',
  'bounce_code',
  'unsubscribe_topic',
  'abuse_section',
] as const;

/** SPEC §8: a window of at most three months. */
const WINDOW_MONTHS = 3;
/** SPEC §8, §7.2: mappings may span at most this many sections (413 beyond). */
const MAX_SECTIONS = 25;
/** How long a download URL (or its header token) is valid after the status call that issued it. */
export const DOWNLOAD_URL_LIFETIME_MS = 15 * 60 * 1000;
/** The file's media type: the stored gzip, sent as it is. */
export const GZIP_TYPE = 'application/gzip';

/** `time` plus whole calendar months in UTC, on the last day of a shorter month (Nov 30 + 3 months = Feb 28 or 29). */
function addMonths(time: number, months: number): number {
  const d = new Date(time);
  const month = d.getUTCMonth() + months;
  const lastDay = new Date(Date.UTC(d.getUTCFullYear(), month + 1, 0)).getUTCDate();
  return Date.UTC(
    d.getUTCFullYear(),
    month,
    Math.min(d.getUTCDate(), lastDay),
    d.getUTCHours(),
    d.getUTCMinutes(),
    d.getUTCSeconds(),
    d.getUTCMilliseconds(),
  );
}

export interface EmailEventExportPlan {
  /** The window [from, to), RFC 3339. */
  from: string;
  to: string;
  segment: { expression: Expression; timeZone: string } | null;
  /** The mapped columns in the request's order: attributes, then tags. */
  mapped: (
    { column: string; sectionId: string; versionId: string } | { column: string; sectionId: string; tagId: string }
  )[];
}

/**
 * What planEmailEventExport can answer: a window refused, a stored segment or its version not
 * found (its query was checked when stored), a time zone, a section, attribute or tag refused,
 * mappings over too many sections, two columns of one name.
 */
export const EMAIL_EVENT_EXPORT_PROBLEMS: readonly ProblemCode[] = [
  ...SECTION_PROBLEMS,
  ...TIME_ZONE_PROBLEMS,
  ...ATTRIBUTE_READ_PROBLEMS,
  'AUD-1007',
  'AUD-1218',
  'AUD-1711',
  'AUD-1713',
  'AUD-1908',
  'AUD-1910',
  'AUD-1911',
];

/**
 * Checks an email event export request against the definitions (400 naming the field; 413 for
 * mappings over more than 25 sections): the window [start_at, end_at) of at most three months,
 * end_at defaulting to three months after start_at.
 */
function planEmailEventExport(scope: AccountScope, body: EmailEventExportBody): EmailEventExportPlan {
  const from = Date.parse(body.start_at);
  const longest = addMonths(from, WINDOW_MONTHS);
  const to = body.end_at === undefined ? longest : Date.parse(body.end_at);
  if (to < from)
    throw new Problem('AUD-1910', `end_at (${body.end_at}) must not be before start_at (${body.start_at})`);
  if (to > longest)
    throw new Problem(
      'AUD-1911',
      `end_at (${body.end_at}): the window from start_at is at most three months, to ${new Date(longest).toISOString()}`,
    );
  const filter = body.segment_filter;
  const segment = filter
    ? {
        expression: segmentExpression(scope.defs, filter, 'segment_filter'),
        timeZone: checkTimeZone(filter.timezone, 'segment_filter.timezone'),
      }
    : null;
  const attributes = (body.additional_attribute_mappings ?? []).map((m, i) => {
    const section = sectionAt(
      scope,
      m.section_discriminator,
      `additional_attribute_mappings[${i}].section_discriminator`,
    );
    requireAttributeVersion(
      section,
      m.attribute_version_id,
      `additional_attribute_mappings[${i}].attribute_version_id`,
    );
    return {
      column: `${m.field_name} (version_id: ${m.attribute_version_id})`,
      sectionId: section.id,
      versionId: m.attribute_version_id,
      field: `additional_attribute_mappings[${i}]`,
    };
  });
  const tags = (body.additional_tag_mappings ?? []).map((m, i) => {
    const section = sectionAt(scope, m.section_discriminator, `additional_tag_mappings[${i}].section_discriminator`);
    const tag = visibleTag(section, m.tag_discriminator, `additional_tag_mappings[${i}].tag_discriminator`);
    return {
      column: `${m.field_name} (version_id: ${m.tag_discriminator})`,
      sectionId: section.id,
      tagId: tag.tag_id,
      field: `additional_tag_mappings[${i}]`,
    };
  });
  const mapped = [...attributes, ...tags];
  const sections = new Set(mapped.map((m) => m.sectionId));
  if (sections.size > MAX_SECTIONS) {
    throw new Problem(
      'AUD-1007',
      `additional_attribute_mappings, additional_tag_mappings: the mappings span ${sections.size} sections, at most ${MAX_SECTIONS}`,
    );
  }
  requireDistinct(mapped.map((m) => [m.column, m.field]));
  return {
    from: new Date(from).toISOString(),
    to: new Date(to).toISOString(),
    segment,
    mapped: mapped.map(({ field: _, ...m }) => m),
  };
}

/** Lines of the text are handed on in pieces of about this many characters. */
const PIECE = 64 * 1024;

/** The statement of an email event export's lines. */
function emailEventStatement(scope: AccountScope, plan: EmailEventExportPlan): Statement {
  const values = new SqlValues();
  const account = values.add(scope.accountId, 'bigint');
  const sectionIds = scope.defs.sections.map((s) => s.id);
  // The primary email attribute: the one the email keyspace maps to.
  const emailAttribute = scope.defs.keyspaces.find((k) => k.kind === 'email')?.mapped_attribute ?? null;
  const text = q.emailEventStatement(values, {
    account,
    events: emailEventsSql(values, { account, sectionIds, from: new Date(plan.from), to: new Date(plan.to) }),
    sections: scope.defs.sections.map((s) => ({
      id: s.id,
      discriminator: s.discriminator,
      addressVersionId: (emailAttribute && currentVersionId(s, emailAttribute)) ?? null,
    })),
    segment: plan.segment
      ? compilePredicate(
          plan.segment.expression,
          { account, now: scope.now.getTime(), timeZone: plan.segment.timeZone },
          values,
        )
      : null,
    firstSourceTime: new Date(FIRST_SOURCE_TIME),
    mapped: plan.mapped,
  });
  return { text, values: values.values };
}

/**
 * The file of an email event export (SPEC §2.16, EEX-16 to EEX-27) as CSV text: the header (the
 * default columns, then the mapped ones), then a line per event of an email activity of any
 * section with an event time in the window, by section, then event time. The database writes
 * each line, which costs the server far less than csv-stringify over rows of cells
 * (docs/benchmarks.md "Activities"); the lines stream through a cursor.
 */
async function* csvText(lines: AsyncIterable<unknown[]>, plan: EmailEventExportPlan): AsyncGenerator<string> {
  let text = stringify([[...EMAIL_EVENT_COLUMNS, ...plan.mapped.map((m) => m.column)]], {
    record_delimiter: 'windows',
  });
  for await (const [line] of lines) {
    text += `${line as string}\r\n`;
    if (text.length >= PIECE) {
      yield text;
      text = '';
    }
  }
  yield text;
}

/** The email event export: read at /emails/reports, its file a gzip-compressed CSV of the database's lines. */
export const emailEventExport: ExportKind<EmailEventExportBody, EmailEventExportPlan> = {
  body: EmailEventExportBody,
  readAt: 'emails',
  // Sent as the stored gzip by readEmailReportFile.
  file: { extension: 'csv', types: [CSV_TYPE] },
  plan: planEmailEventExport,
  statement: emailEventStatement,
  async produce(pool, scope, plan) {
    return { document: csvText(q.emailEventLines(pool, emailEventStatement(scope, plan)), plan) };
  },
};

// ---- Status and download ----

/** What signs download credentials: the service's secret, and the account and report they open. */
type Grant = { secret: string; accountId: string; reportId: string; expiresAt: number; form: 'url' | 'header' };

/** A credential: its expiry and an HMAC of what it opens, in the form it is given in (URL or header). */
function credential(g: Grant): string {
  const key = crypto.createHmac('sha256', g.secret).update('email event export downloads').digest();
  const mac = crypto
    .createHmac('sha256', key)
    .update(`${g.form}\n${g.accountId}\n${g.reportId}\n${g.expiresAt}`)
    .digest('base64url');
  return `${g.expiresAt}.${mac}`;
}

/** The status of an email event export, and with a completed one the token of a header_auth URL. */
export interface EmailReportAnswer {
  body: EmailReportStatus;
  headerToken?: string;
}

/**
 * GET /emails/reports/{id} (SPEC §4.8, EEX-07 to EEX-15): `requested`, `completed` or `error`;
 * completed, a new download URL valid for DOWNLOAD_URL_LIFETIME_MS (and not after the file
 * expires): with `headerAuth`, the URL carries no credential and the answer carries the token
 * that the download needs in a header; without it, the URL carries its own. 404 for an id that is
 * no email event export of the account; 410 once the file has expired.
 */
export async function emailReportStatus(
  db: Queryable,
  scope: AccountScope,
  publicUrl: string,
  reportId: string,
  headerAuth: boolean,
): Promise<EmailReportAnswer> {
  requireAllSections(scope, 'an email event export');
  const row = await q.findExport(db, scope.accountId, reportId);
  if (!row || row.kind !== 'email-events') throw new Problem('AUD-1903', `No email event export "${reportId}"`);
  const none = { message: null, file_download_url: null, file_download_url_expires_at: null, file_expires_at: null };
  switch (row.status) {
    case 'queued':
    case 'in_progress':
      return { body: { report_id: reportId, result: { status: 'requested', ...none } } };
    case 'failed':
      return {
        body: {
          report_id: reportId,
          result: { status: 'error', ...none, message: row.message ?? 'the export could not be written' },
        },
      };
    case 'expired':
      throw gone(reportId);
    case 'ready': {
      const fileExpiresAt = row.expires_at!.getTime();
      if (fileExpiresAt <= scope.now.getTime()) throw gone(reportId);
      const expiresAt = Math.min(scope.now.getTime() + DOWNLOAD_URL_LIFETIME_MS, fileExpiresAt);
      const grant = { secret: scope.secret, accountId: scope.accountId, reportId, expiresAt };
      const url = `${publicUrl}/files/email-events/${scope.accountId}/${reportId}`;
      const result = {
        status: 'completed' as const,
        message: null,
        file_download_url: headerAuth ? url : `${url}?token=${credential({ ...grant, form: 'url' })}`,
        file_download_url_expires_at: new Date(expiresAt).toISOString(),
        file_expires_at: new Date(fileExpiresAt).toISOString(),
      };
      return {
        body: { report_id: reportId, result },
        ...(headerAuth ? { headerToken: credential({ ...grant, form: 'header' }) } : {}),
      };
    }
  }
}

function gone(reportId: string): Problem {
  return new Problem(
    'AUD-1902',
    `The email event export "${reportId}" is no longer available (its file is kept for one day); request a new one`,
  );
}

/**
 * The file at a download URL (EEX-09 to EEX-15): the credential of the URL (`token`) or of the
 * header (`headerToken`) must be one a status call issued for this account and report (403
 * otherwise), the file still kept (410 otherwise) and the credential not expired (403). Answers
 * the stored gzip-compressed CSV.
 */
export async function readEmailReportFile(
  db: Queryable,
  files: FileStore,
  scope: AccountScope,
  reportId: string,
  given: { token?: string; headerToken?: string },
): Promise<Readable> {
  const refused = new Problem(
    'AUD-1913',
    'The download URL needs its credential: the token of the URL, or with header_auth the token of the status answer in the x-<vendor>-auth header; call the status endpoint for a new URL',
  );
  const [form, text] =
    given.token !== undefined
      ? (['url', given.token] as const)
      : given.headerToken !== undefined
        ? (['header', given.headerToken] as const)
        : [undefined, ''];
  if (form === undefined) throw refused;
  const expiresAt = Number(text.split('.')[0]);
  if (!Number.isSafeInteger(expiresAt)) throw refused;
  const expected = Buffer.from(
    credential({ secret: scope.secret, accountId: scope.accountId, reportId, expiresAt, form }),
  );
  const actual = Buffer.from(text);
  if (actual.length !== expected.length || !crypto.timingSafeEqual(actual, expected)) throw refused;
  const row = await q.findExport(db, scope.accountId, reportId);
  if (
    !row ||
    row.kind !== 'email-events' ||
    row.status !== 'ready' ||
    row.expires_at!.getTime() <= scope.now.getTime() ||
    !(await files.exists(row.file_key!))
  ) {
    throw gone(reportId);
  }
  if (expiresAt < scope.now.getTime())
    throw new Problem(
      'AUD-1912',
      `This download URL expired at ${new Date(expiresAt).toISOString()}; call the status endpoint for a new one`,
    );
  return files.read(row.file_key!);
}
