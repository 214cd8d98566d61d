/**
 * The limits of SPEC §8 that each account has by default. An operator can override any of them
 * per account (manifest `account.limits` or `PATCH /admin/accounts/{id}`); `null` lifts a limit.
 */
export const DEFAULT_LIMITS = {
  /** Requests per second per account, whatever the number of API keys. */
  requests_per_second: 100,
  token_requests_per_minute: 10,
  import_requests_per_minute: 10,
  profile_export_requests_per_second: 1,
  event_export_requests_per_minute: 1,
  export_downloads_per_minute: 60,
  profile_key_operations_per_second: 10,
  /** SPEC §8 names both 200 and 100; 200 is taken (CHECKLIST DEF-13). */
  tags_per_section: 200,
  pending_imports: 3,
  pending_exports: 10,
  merges_per_profile: 500,
} as const;

export type LimitName = keyof typeof DEFAULT_LIMITS;
export type Limits = { [K in LimitName]: number | null };
export type LimitOverrides = Partial<Limits>;

export const LIMIT_NAMES = Object.keys(DEFAULT_LIMITS) as LimitName[];

/** The limits in force for an account: its overrides over the defaults. */
export function effectiveLimits(overrides: LimitOverrides): Limits {
  return { ...DEFAULT_LIMITS, ...overrides };
}
