import fs from 'node:fs';

/** The program's version (package.json), as `--version` prints it and `/metrics` reports it. */
export const VERSION: string = JSON.parse(
  fs.readFileSync(new URL('../../package.json', import.meta.url), 'utf8'),
).version;
