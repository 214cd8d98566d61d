import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { inject } from 'vitest';

// Declared = observed (test/declared-problems.ts): every server a test starts (TestServer) notes
// each problem code an operation answers, with the codes the operation declares (the table of its
// description, as /openapi.json and /docs show it), in a file of the run's scratch folder. The
// check at the end of the run reads the notes of every test file and worker.

/** One observation: an operation answered a code, and the codes it declares. */
export interface Observation {
  operation: string;
  code: string;
  declared: string[];
}

/** The codes of an operation's description: the rows of its table of errors (describeOperation). */
export function declaredIn(description: string | undefined): string[] {
  return [...(description ?? '').matchAll(/^\| \d{3} \| `(AUD-\d+)` \|/gm)].map((m) => m[1]);
}

const noted = new Set<string>();

/** Notes, in the run's record, the problem code of every answer of an operation of `app`. */
export function recordProblems(app: FastifyInstance): void {
  const folder = inject('problemRecord' as never) as string | undefined;
  if (!folder) return;
  const file = `${folder}/${process.pid}.jsonl`;
  app.addHook('onSend', (request, reply, payload, done) => {
    const operation = (request.routeOptions.schema as { operationId?: string } | undefined)?.operationId;
    const type = String(reply.getHeader('content-type') ?? '');
    if (operation && type.startsWith('application/problem+json') && typeof payload === 'string') {
      const code = /"type":"\/errors\/(AUD-\d+)"/.exec(payload)?.[1];
      if (code && !noted.has(`${operation} ${code}`)) {
        noted.add(`${operation} ${code}`);
        const declared = declaredIn(request.routeOptions.schema?.description);
        fs.appendFileSync(file, JSON.stringify({ operation, code, declared } satisfies Observation) + '\n');
      }
    }
    done(null, payload);
  });
}
