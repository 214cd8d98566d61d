/**
 * The area's SQL, one named function per statement, by family in queries/: identifiers (profiles,
 * keys, clusters, locked identities), section data (its rules, reads and writes), events, and the
 * bulk statements of imports, the
 * profiles written since the live segments last looked (changes), and the console's browsing.
 */
export * from './queries/identifiers.ts';
export * from './queries/section-rules.ts';
export * from './queries/section-data.ts';
export * from './queries/section-writes.ts';
export * from './queries/events.ts';
export * from './queries/bulk.ts';
export * from './queries/changes.ts';
export * from './queries/browse.ts';
