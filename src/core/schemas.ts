import { Type } from 'typebox';

/** The keyword of `ListedString`, which /openapi.json writes as `enum`. */
export const LISTED_VALUES = 'x-listed-values';

/**
 * A string that is one of `values`, listed as the field's `enum` in /openapi.json (so the typed
 * clients take and answer only these), while validation lets any string through: the domain code
 * checks a request's value and answers the reference's own code for another (a consent type's
 * AUD-1602, 1603), which a schema's `enum` would turn into a generic 400.
 */
export function ListedString(values: readonly string[], options: { description?: string } = {}) {
  return Type.String({ ...options, [LISTED_VALUES]: [...values] });
}

/** A date-time in RFC 3339 UTC form (SPEC §1.2). */
export const DateTime = Type.String({ format: 'date-time', description: 'RFC 3339 date-time, UTC' });

/** Keyspace discriminator → what a profile's value of this type allows through that keyspace. */
export const KeyspacePermissions = Type.Record(
  Type.String(),
  Type.Array(Type.Union([Type.Literal('read'), Type.Literal('write')])),
  {
    description: 'Map from keyspace discriminator to the operations allowed through it',
  },
);

/** An account's name: 1 to 255 characters, as the names of definitions. */
export const AccountName = Type.String({
  minLength: 1,
  maxLength: 255,
  description: 'Account name, 1 to 255 characters',
});
