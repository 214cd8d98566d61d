/**
 * The rules every statement of section data (profile_sections) follows, each written once: what a
 * profile shows, how a write changes a row of a standalone profile or of a cluster's leader, the
 * set times of values, the history of replaced values, and the check that a write was not raced.
 */

export type ValueMap = Record<string, unknown>;

export interface SectionDataRow {
  attributes: ValueMap;
  tags: Record<string, boolean>;
}

/** The tags a profile has: stored maps keep removed tags as false while a merge cluster needs them. */
export function trueTags(tags: Record<string, boolean>): Record<string, boolean> {
  return Object.fromEntries(Object.entries(tags).filter(([, v]) => v === true));
}

/**
 * SQL: what the section row `row` (an alias of profile_sections) shows: the values and tags of the
 * cluster it leads, else its own. `attributes` leaves out cleared entries (null), which a cluster's
 * leader keeps in its own map; `tags` still holds removed tags as false (trueTags, profile_true_tags).
 */
export const SHOWN = {
  attributes: (row: string) => `jsonb_strip_nulls(coalesce(${row}.cluster_attributes, ${row}.attributes))`,
  /** As stored, cleared entries included (for statements that read the values, not answer them). */
  storedAttributes: (row: string) => `coalesce(${row}.cluster_attributes, ${row}.attributes)`,
  tags: (row: string) => `coalesce(${row}.cluster_tags, ${row}.tags)`,
};

/**
 * SQL: the SET list of an update of the section row `ps` with a merge patch of attributes `a`
 * (jsonb, null clears) and, when given, of tags `t` (jsonb, false removes), at the time `at`. A
 * standalone profile drops cleared entries; the leader of a cluster keeps them in its own maps, so
 * that they hide the members' older values, and updates the cluster's values.
 */
export function clusterWrite(a: string, t: string | undefined, at: string): string {
  const attributes = `case when ps.cluster_attributes is null then jsonb_strip_nulls(ps.attributes || ${a}) else ps.attributes || ${a} end`;
  const tags =
    t === undefined
      ? ''
      : `
         tags = case when ps.cluster_tags is null then profile_true_tags(ps.tags || ${t}) else ps.tags || ${t} end,
         cluster_tags = profile_true_tags(ps.cluster_tags || ${t}),`;
  return `attributes = ${attributes},
         attribute_set_at = ${setTimes('ps.attribute_set_at', 'ps.attributes', attributes, at)},
         cluster_attributes = case when ps.cluster_attributes is not null then jsonb_strip_nulls(ps.cluster_attributes || ${a}) end,${tags}
         updated_at = now()`;
}

/**
 * SQL: the select list (attributes, tags, attribute_set_at) of a new section row from a merge
 * patch of attributes `a` and tags `t` (jsonb; `'{}'::jsonb` for none), set at `at`.
 */
export const NEW_ROW = (a: string, t: string, at: string) =>
  `jsonb_strip_nulls(${a}), ${t === "'{}'::jsonb" ? t : `profile_true_tags(${t})`}, ${setTimes('null::jsonb', 'null::jsonb', `jsonb_strip_nulls(${a})`, at)}`;

/**
 * SQL: the set times (attribute_set_at) of the entries of `next`, a section row's attributes after
 * a write, from its set times and values before (`times`, `values`; null for a new row): an entry
 * that keeps its value keeps its time, any other was set `at` (a timestamptz), in microseconds
 * since 1970. Written out in each statement rather than as a SQL function, which PostgreSQL would
 * call through its function executor for every row written.
 */
export const setTimes = (
  times: string,
  values: string,
  next: string,
  at: string,
) => `(select coalesce(jsonb_object_agg(n.key,
    case when ${values} -> n.key = n.value and ${times} ? n.key then ${times} -> n.key else ${microsJson(at)} end), '{}'::jsonb)
  from jsonb_each(${next}) n)`;

/**
 * SQL: a timestamptz as a JSON integer of microseconds since 1970, written with immutable
 * functions only (the difference to a constant, an interval's epoch, casts through text) rather
 * than extract and to_jsonb, which are stable: Citus accepts only immutable functions in an
 * upsert's DO UPDATE and in the CASE of an UPDATE on a distributed table.
 */
const microsJson = (at: string) =>
  `((extract(epoch from (${at}) - 'epoch'::timestamptz) * 1000000)::bigint::text::jsonb)`;

/**
 * The history insert of a write of section rows: from the CTE `written`, which returns each row's
 * account_id, profile_id, section_id, new_values and replaced_at (the write's time), and the CTE
 * `old`, the rows as the statement read them before writing (profile_id, section_id, attributes,
 * attribute_set_at; none for a row the write inserts), the values replaced
 * (profile_replaced_values of migration 0015). A first value writes no row.
 */
export const REPLACED = `insert into attribute_history (account_id, profile_id, section_id, version_id, value, set_at, replaced_at)
     select w.account_id, w.profile_id, w.section_id, r.version_id, r.value, r.set_at, w.replaced_at
     from written w join old o on o.profile_id = w.profile_id and o.section_id = w.section_id
     cross join lateral profile_replaced_values(o.attribute_set_at, o.attributes, w.new_values) r`;

/** What a write of section rows at the time `at` returns for REPLACED. */
export const WRITTEN = (at: string) =>
  `returning ps.account_id, ps.profile_id, ps.section_id, ps.attributes as new_values, ${at} as replaced_at`;

/**
 * SQL, true: the check of a write's final select that its CTEs `written` (the rows updated) and
 * `inserted` (the rows created) wrote all of its `targets` rows; otherwise (a row that another
 * writer changed since `old` read it, or created after `old` found none) it fails the whole statement
 * with serialization_failure (profile_write_raced of migration 0019), so that nothing of it
 * commits, and the caller tries again (retryRaced), when `old` finds the row.
 */
export const ALL_WRITTEN = (targets: string) =>
  `(select case when (select count(*) from written) + (select count(*) from inserted) < ${targets} then profile_write_raced() else true end)`;

/*
 * How a write of section rows finds the values it replaces, for the history. PostgreSQL has
 * RETURNING old only from 18 on, so each write reads its rows first, in the CTE `old`, without a
 * lock, and updates only the rows that still hold what `old` read (UNCHANGED, a condition of the
 * update that PostgreSQL checks again on the row's latest version when another writer changed it
 * meanwhile). Rows `old` did not find are inserted, unless another writer created them in between.
 * A row left alone either way fails the statement (ALL_WRITTEN), which is tried again. The same
 * form runs on Citus, which runs a statement's CTEs one after the other, each with a snapshot of its
 * own, in one transaction on the account's node: hence the comparison rather than one snapshot, an
 * update and an insert rather than an upsert (whose DO UPDATE may read no other CTE there), and
 * times of immutable functions only (microsJson).
 */

/** SQL: the row `ps` still holds the values that `o`, its row of the CTE `old`, read. */
export const UNCHANGED = 'ps.attributes = o.attributes and ps.attribute_set_at = o.attribute_set_at';
