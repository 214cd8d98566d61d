import { existsSync } from 'node:fs';

// Where Debian's chromium is, for the console's browser tests and its bench (bench/console.ts).

/** Debian's chromium, or the one CHROMIUM_PATH names; undefined when there is none. */
export const CHROMIUM = [process.env.CHROMIUM_PATH, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find(
  (p): p is string => !!p && existsSync(p),
);
