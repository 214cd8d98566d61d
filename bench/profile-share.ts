/**
 * `node bench/profile-share.ts <file.cpuprofile> <source>`: the share of a process's busy time
 * (its samples that are not idle) spent in one source file of its own, with the native and
 * built-in work called from it. A sample counts when its innermost frame is in a file whose path
 * ends with `<source>`, or is native or Node's own (no file, or `node:…`) with the nearest frame
 * of a file above it in that source. So the next hook, which an `onResponse` hook's `done()` runs
 * inside its frame, is not counted as the hook's.
 *
 * For example, the request log's share of a server at `info` under `npm run bench`:
 *
 *   BENCH_SERVER_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" BENCH_SERVERS=1 npm run bench
 *   node bench/profile-share.ts /tmp/prof/CPU.<date>.<pid of the info server>.0.001.cpuprofile src/http/logging.ts
 *
 * (the bench prints each server's pid; `.0.` is the main thread's profile).
 */
import fs from 'node:fs';

interface Frame {
  functionName: string;
  url: string;
  lineNumber: number;
}
interface Node {
  id: number;
  callFrame: Frame;
  children?: number[];
}
interface Profile {
  nodes: Node[];
  samples: number[];
  timeDeltas: number[];
}

const [file, source] = process.argv.slice(2);
if (!file || !source) {
  console.error('usage: node bench/profile-share.ts <file.cpuprofile> <source file, e.g. src/http/logging.ts>');
  process.exit(2);
}
const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as Profile;
const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
const parents = new Map<number, number>();
for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);

const native = (frame: Frame) => frame.url === '' || frame.url.startsWith('node:');
const inSource = (frame: Frame) => frame.url.replace(/^file:\/\//, '').endsWith(source);

/** The sample's own frame, or for native work the nearest frame of a file above it. */
function owner(id: number): Frame {
  for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
    const frame = nodes.get(at)!.callFrame;
    if (!native(frame)) return frame;
  }
  return nodes.get(id)!.callFrame;
}

let busy = 0;
let spent = 0;
const byFunction = new Map<string, number>();
profile.samples.forEach((id, i) => {
  const frame = nodes.get(id)!.callFrame;
  const dt = profile.timeDeltas[i] ?? 0;
  if (frame.functionName === '(idle)') return;
  busy += dt;
  if (!inSource(owner(id))) return;
  spent += dt;
  const name = `${frame.functionName || '(anonymous)'}${native(frame) ? '' : `:${frame.lineNumber + 1}`}`;
  byFunction.set(name, (byFunction.get(name) ?? 0) + dt);
});
const percent = (us: number) => `${((100 * us) / busy).toFixed(2)}%`;
console.log(`${source}: ${percent(spent)} of ${(busy / 1e6).toFixed(2)} s busy`);
for (const [name, us] of [...byFunction].sort((a, b) => b[1] - a[1]).slice(0, 15))
  console.log(`  ${percent(us).padStart(7)}  ${name}`);
