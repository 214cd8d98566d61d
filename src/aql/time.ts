import { Problem, type ProblemCode } from '../core/problems.ts';
import type { TimeWindow } from './ast.ts';

/** What `checkTimeZone` can answer. */
export const TIME_ZONE_PROBLEMS: readonly ProblemCode[] = ['AUD-1712'];

/** Refuses a time zone that is not an IANA name this runtime knows (SPEC §7.3 "time zone not recognised"). */
export function checkTimeZone(timeZone: string, field: string): string {
  try {
    // The zone's formatter, made once (making one per evaluation took a twentieth of its CPU time).
    formatterOf(timeZone);
    return timeZone;
  } catch {
    throw new Problem(
      'AUD-1712',
      `${field}: time zone "${timeZone}" is not recognised; use an IANA name such as "Europe/Oslo" or "UTC"`,
    );
  }
}

/** Each time zone's wall-clock formatter, kept once made: only zones that exist are. */
const formatters = new Map<string, Intl.DateTimeFormat>();

/** The wall-clock formatter of a time zone; a RangeError for a name the runtime does not know. */
function formatterOf(timeZone: string): Intl.DateTimeFormat {
  let f = formatters.get(timeZone);
  if (!f) {
    f = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      era: 'short',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, f);
  }
  return f;
}

/** 400 Gregorian years, in ms: the calendar repeats after them. */
const GREGORIAN_CYCLE = 146_097 * 86_400_000;

/** Date.UTC for every year: Date.UTC itself takes the years 0 to 99 for 1900 to 1999. */
function utc(y: number, mo: number, d: number, h = 0, mi = 0, s = 0, ms = 0): number {
  return y >= 0 && y <= 99
    ? Date.UTC(y + 400, mo, d, h, mi, s, ms) - GREGORIAN_CYCLE
    : Date.UTC(y, mo, d, h, mi, s, ms);
}

const HOUR = 3_600_000;
/**
 * A time zone's offset from UTC (ms) by hour since 1970, for the hours in which it does not change:
 * the wall clock is then UTC's fields of the instant plus the offset, without a formatter's
 * formatToParts per call (a window's bounds asked for several per evaluation). Cleared when full.
 */
const hourOffsets = new Map<string, number>();
const HOUR_OFFSETS_KEPT = 50_000;

/** The wall-clock fields of an instant in a time zone; years before 1 AD count astronomically (0 is 1 BC). */
export function wallClock(ms: number, timeZone: string): number[] {
  const hour = Math.floor(ms / HOUR);
  const key = `${hour} ${timeZone}`;
  let offset = hourOffsets.get(key);
  if (offset === undefined) {
    // The offsets at the hour's first and last millisecond: equal, no change of offset lies between
    // them (a time zone changes its offset at most once in an hour, and never back within it).
    const first = offsetAt(hour * HOUR, timeZone);
    offset = first === offsetAt(hour * HOUR + HOUR - 1, timeZone) ? first : NaN;
    if (hourOffsets.size >= HOUR_OFFSETS_KEPT) hourOffsets.clear();
    hourOffsets.set(key, offset);
  }
  const wall = new Date(ms + offset);
  if (Number.isNaN(wall.getTime())) return formattedWallClock(ms, timeZone);
  return [
    wall.getUTCFullYear(),
    wall.getUTCMonth() + 1,
    wall.getUTCDate(),
    wall.getUTCHours(),
    wall.getUTCMinutes(),
    wall.getUTCSeconds(),
    wall.getUTCMilliseconds(),
  ];
}

/** How far a time zone's wall clock is ahead of UTC at an instant (ms), by its formatter; NaN beyond dates' range. */
function offsetAt(ms: number, timeZone: string): number {
  if (!Number.isFinite(new Date(ms).getTime())) return NaN;
  const [y, mo, d, h, mi, s, msPart] = formattedWallClock(ms, timeZone);
  return utc(y, mo - 1, d, h, mi, s, msPart) - ms;
}

/** wallClock by the time zone's formatter, for any instant (what wallClock's offsets are checked against). */
export function formattedWallClock(ms: number, timeZone: string): number[] {
  const parts = Object.fromEntries(
    formatterOf(timeZone)
      .formatToParts(ms)
      .map((p) => [p.type, p.value]),
  );
  const year = parts.era === 'BC' ? 1 - Number(parts.year) : Number(parts.year);
  return [
    year,
    Number(parts.month),
    Number(parts.day),
    Number(parts.hour),
    Number(parts.minute),
    Number(parts.second),
    ((ms % 1000) + 1000) % 1000,
  ];
}

/** The instant of a wall-clock time in a time zone (the earlier one when a DST change repeats it). */
function fromWallClock(fields: number[], timeZone: string): number {
  const [y, mo, d, h, mi, s, ms] = fields;
  const asUtc = utc(y, mo - 1, d, h, mi, s, ms);
  let guess = asUtc;
  for (let k = 0; k < 3; k++) {
    const [gy, gmo, gd, gh, gmi, gs] = wallClock(guess, timeZone);
    const offset = utc(gy, gmo - 1, gd, gh, gmi, gs, ms) - guess;
    const next = asUtc - offset;
    if (next === guess) break;
    guess = next;
  }
  return guess;
}

const DURATION = { minute: 60_000, hour: 3_600_000, day: 86_400_000, week: 604_800_000 } as const;

/** Years of the range of ECMAScript dates (±8.64e15 ms), with a margin for time zone offsets. */
const FIRST_YEAR = -271_820;

/**
 * The instants [start, end] a time window covers at evaluation time `now` in `timeZone`
 * (docs/aql.md "Time windows"). Both back ends use these bounds, so they agree. A bound further
 * back than dates reach (inLast with a huge count) is -Infinity.
 */
export function windowBounds(window: TimeWindow, now: number, timeZone: string): { start: number; end: number } {
  if (window.kind === 'inLast') {
    if (window.unit === 'month') {
      const wall = wallClock(now, timeZone);
      const monthsBack = (n: number) => {
        const [y, mo, d, ...rest] = wall;
        const total = y * 12 + (mo - 1) - n;
        const ty = Math.floor(total / 12);
        if (!(ty >= FIRST_YEAR)) return -Infinity;
        const tm = total - ty * 12 + 1;
        const lastDay = new Date(utc(ty, tm, 0)).getUTCDate();
        return fromWallClock([ty, tm, Math.min(d, lastDay), ...rest], timeZone);
      };
      return { start: monthsBack(window.to), end: monthsBack(window.from) };
    }
    const unit = DURATION[window.unit];
    return { start: now - window.to * unit, end: now - window.from * unit };
  }
  return { start: dateStart(window.start, timeZone), end: dateEnd(window.end, timeZone) };
}

/** A date or date-time of a query as an instant: a date is local midnight in the time zone; a date-time without offset is local. */
function dateStart(text: string, timeZone: string): number {
  if (/[zZ]|[+-]\d{2}:\d{2}$/.test(text)) return Date.parse(text);
  const [date, time = '00:00:00'] = text.split('T');
  const [y, mo, d] = date.split('-').map(Number);
  const [h, mi, s = '0'] = time.split(':');
  const seconds = Number(s);
  return fromWallClock(
    [y, mo, d, Number(h), Number(mi), Math.floor(seconds), Math.round((seconds % 1) * 1000)],
    timeZone,
  );
}

/** The end of a date of a query: the last millisecond of that day in the time zone; a date-time is itself. */
function dateEnd(text: string, timeZone: string): number {
  if (text.length > 10) return dateStart(text, timeZone);
  const [y, mo, d] = text.split('-').map(Number);
  const next = new Date(utc(y, mo - 1, d + 1));
  return fromWallClock([next.getUTCFullYear(), next.getUTCMonth() + 1, next.getUTCDate(), 0, 0, 0, 0], timeZone) - 1;
}
