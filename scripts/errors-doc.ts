// Writes the table of docs/errors.md from src/core/problems.ts: `npm run docs:errors`.
import fs from 'node:fs';
import path from 'node:path';
import { PROBLEMS } from '../src/core/problems.ts';

const file = path.resolve(import.meta.dirname, '..', 'docs', 'errors.md');
const text = fs.readFileSync(file, 'utf8');
const head = text.slice(0, text.indexOf('| Code | HTTP status | Title |'));
const rows = Object.entries(PROBLEMS).map(([code, p]) => `| ${code} | ${p.status} | ${p.title} |`);
fs.writeFileSync(file, `${head}| Code | HTTP status | Title |\n|---|---|---|\n${rows.join('\n')}\n`);
