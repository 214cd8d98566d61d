import type { Definitions } from './definitions.ts';
import type { Limits } from './limits.ts';

/** Who is calling: established from a verified bearer token. */
export interface Caller {
  accountId: string;
  clientId: string;
  /** Sections the API key may use; null: all. */
  sectionIds: string[] | null;
}

/**
 * What every domain operation knows of its account and moment: built once per request (with the
 * caller) or per job (without one), so that domain functions read no transport and no globals.
 */
export interface AccountScope {
  accountId: string;
  defs: Definitions;
  limits: Limits;
  /** Key of the hashes of locked identities. */
  secret: string;
  now: Date;
  /** The API key behind a request; absent for work done outside a request (jobs), which no section restriction binds. */
  caller?: Caller;
}
