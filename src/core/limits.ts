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
  /**
   * Seconds an access token lives (SPEC §5.4: up to 24 hours). Real clients refresh when
   * `expires_in - 3600` has passed, so a shorter lifetime makes them ask on nearly every call;
   * an account may shorten it to no less than 2 hours, and null means the 24 hours.
   */
  token_lifetime_seconds: 86_400,
  /**
   * Failed webhook delivery attempts in a row after which an endpoint is paused (docs/webhooks.md
   * "Pausing"); null never pauses.
   */
  webhook_failures_before_pause: 100,
  /**
   * Days a webhook event is kept, with its deliveries and their attempts, once none of its
   * deliveries is pending (docs/webhooks.md "Retention"); null keeps them until their endpoint goes.
   */
  webhook_retention_days: 30,
} as const;

export type LimitName = keyof typeof DEFAULT_LIMITS;
export type Limits = { [K in LimitName]: number | null };
export type LimitOverrides = Partial<Limits>;

export const LIMIT_NAMES = Object.keys(DEFAULT_LIMITS) as LimitName[];

/** The range of each limit that has one, beyond being a whole number of at least 0. */
export const LIMIT_RANGES: Partial<Record<LimitName, { minimum: number; maximum: number }>> = {
  token_lifetime_seconds: { minimum: 2 * 3600, maximum: 24 * 3600 },
  webhook_retention_days: { minimum: 1, maximum: 3650 },
};

/** The limits in force for an account: its overrides over the defaults. */
export function effectiveLimits(overrides: LimitOverrides): Limits {
  return { ...DEFAULT_LIMITS, ...overrides };
}
