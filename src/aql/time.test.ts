import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formattedWallClock, wallClock, windowBounds } from './time.ts';

// Zones with daylight saving time, half- and quarter-hour offsets, a half-hour daylight shift
// (Lord Howe), changes at odd times and local mean times of seconds (Amsterdam before 1937).
const ZONES = [
  'UTC',
  'Europe/Oslo',
  'Europe/Amsterdam',
  'America/St_Johns',
  'America/Sao_Paulo',
  'Asia/Kathmandu',
  'Asia/Kolkata',
  'Australia/Lord_Howe',
  'Pacific/Chatham',
  'Africa/Casablanca',
];
const HOUR = 3_600_000;
/** The range of ECMAScript dates. */
const LAST = 8.64e15;

describe('wallClock (docs/aql.md "Time windows")', () => {
  it('answers what the time zone formatter answers, hour by hour through a year of changes', () => {
    const start = Date.UTC(2026, 0, 1);
    for (const zone of ZONES)
      for (let hour = 0; hour < 366 * 24; hour++) {
        // A random instant of each hour, and the hour's last millisecond: where a change falls.
        for (const ms of [start + hour * HOUR + Math.floor(Math.random() * HOUR), start + hour * HOUR + HOUR - 1])
          if (wallClock(ms, zone).join() !== formattedWallClock(ms, zone).join())
            expect([zone, new Date(ms).toISOString(), wallClock(ms, zone)]).toEqual([
              zone,
              new Date(ms).toISOString(),
              formattedWallClock(ms, zone),
            ]);
      }
  });

  it('answers what the formatter answers at any instant dates reach, to the ends of their range', () => {
    fc.assert(
      fc.property(
        fc.constantFrom(...ZONES),
        fc.oneof(
          fc.integer({ min: -LAST, max: LAST }),
          fc.integer({ min: Date.UTC(1800, 0, 1), max: Date.UTC(2100, 0, 1) }),
          fc.integer({ min: LAST - 2 * HOUR, max: LAST }),
          fc.integer({ min: -LAST, max: -LAST + 2 * HOUR }),
        ),
        (zone, ms) => {
          expect(wallClock(ms, zone)).toEqual(formattedWallClock(ms, zone));
        },
      ),
      { numRuns: 3000 },
    );
  });

  it('gives the bounds of a month window across a change of offset', () => {
    // 2026-03-29 01:00 UTC Oslo moves from +01 to +02; a month back from 02:30 UTC is 2026-02-28
    // 04:30 local (+01), the 28th being the last day of February.
    const now = Date.UTC(2026, 2, 31, 2, 30);
    const bounds = windowBounds({ kind: 'inLast', unit: 'month', from: 1, to: 1, at: 0 }, now, 'Europe/Oslo');
    expect(new Date(bounds.start).toISOString()).toBe('2026-02-28T03:30:00.000Z');
  });
});
