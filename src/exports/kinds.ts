import { consentCount, consentExport } from './by-consent.ts';
import { segmentExport } from './by-segment.ts';
import { duplicateExport } from './duplicates.ts';
import { emailEventExport } from './email-events.ts';
import { eventExport } from './events.ts';
import { JSON_TYPE } from './formats.ts';
import type { ExportKind, StoredKind } from './kind.ts';

/**
 * The table of export kinds (docs/architecture.md "Where a new export kind goes"): the exports
 * created through a request, by the name stored in their row's `kind`. The life cycle
 * (exports.ts) and the route table (src/http/routes/exports.ts) read them from here.
 */
export const EXPORT_KINDS = {
  consents: consentExport,
  'consents-count': consentCount,
  duplicates: duplicateExport,
  segments: segmentExport,
  events: eventExport,
  'email-events': emailEventExport,
};
export type ExportKindName = keyof typeof EXPORT_KINDS;

/** The body of a kind's request, as checked against its schema. */
export type BodyOf<K extends ExportKindName> = Parameters<(typeof EXPORT_KINDS)[K]['plan']>[1];

/** A kind created through a request, by its stored name; undefined for another (the single profile export). */
export function exportKind(name: string): ExportKind<unknown, unknown> | undefined {
  return Object.hasOwn(EXPORT_KINDS, name) ? EXPORT_KINDS[name as ExportKindName] : undefined;
}

/** The single profile export's stored name: single.ts creates and runs it (callbacks, jobs of its own). */
export const SINGLE_EXPORT = 'single';

/**
 * Every kind of stored export by the name in its row: those created through a request, and the
 * single profile export, which the life cycle knows only by where it is read and its file.
 */
const STORED_KINDS: Readonly<Record<string, StoredKind>> = {
  ...EXPORT_KINDS,
  [SINGLE_EXPORT]: { readAt: 'single', file: { extension: 'json', types: [JSON_TYPE] } },
};

/** What the life cycle knows of an export of any stored kind. */
export function storedKind(name: string): StoredKind | undefined {
  return Object.hasOwn(STORED_KINDS, name) ? STORED_KINDS[name] : undefined;
}
