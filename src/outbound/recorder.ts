/**
 * The record of outbound calls, and the faults injected into them (docs/emulator.md "Outbound
 * calls"): in `audience emulate`, every call the service makes to a target outside it (a single
 * profile export's callback, a transactional message, any later kind such as a webhook delivery)
 * goes through a tap that records what was sent and what came back, and that can answer in the
 * target's place: refuse the connection, wait first, or answer a status.
 *
 * A library: a kind of call plugs in by calling `OutboundTap.call` around its delivery with its
 * own `kind`, and says how an answer reads and what a fault means in its terms (a callback's
 * status, a mail server's refusal). `serve` has no tap: calls go straight out.
 */

/** What a call sends: its kind (`callback`, `mail`, `webhook` …), method, target (a URL, an address), body, and headers of its own. */
export interface OutboundAttempt {
  kind: string;
  method: string;
  target: string;
  body: unknown;
  /** The headers the call's kind adds (a webhook's id, timestamp and signature). */
  headers?: Record<string, string>;
}

/** What came back: a status and the answer's text, or why there was none. */
export interface OutboundAnswer {
  status?: number;
  body?: string;
  error?: string;
}

/** A recorded call, with its answer. */
export interface OutboundCall extends OutboundAttempt {
  id: number;
  /** When it began, by the emulator's clock. */
  at: string;
  answer: OutboundAnswer;
  duration_ms: number;
  /** The fault that answered (or delayed) it. */
  fault?: number;
  /** The namespace (an account of the emulator's tests) the call was made for. */
  namespace?: string;
}

/** A fault: the next `times` calls of `kind` (any when absent) to a target matching `target` (`*`: any characters). */
export interface OutboundFaultSpec {
  /** Only calls made for this namespace; any call when absent. */
  namespace?: string;
  kind?: string;
  target?: string;
  times: number;
  /** Wait this long before the call goes (or before the fault answers). */
  delay_ms?: number;
  /** Answer this status in the target's place (a callback's HTTP status; a mail server's reply code). */
  status?: number;
  /** Refuse the connection: no answer. */
  refuse?: boolean;
  /** Apply to each matching call with this probability (1 by default); a call spared does not spend it. */
  probability?: number;
}

export interface OutboundFault extends OutboundFaultSpec {
  id: number;
  remaining: number;
}

/** What a fault did in the target's place, for the caller to turn into its own kind's answer or error. */
export type FaultOutcome = { fault: number } & ({ refused: true } | { status: number });

/** How a kind of call plugs in: its delivery, how its result reads, and what a fault's outcome is in its terms. */
export interface OutboundTap {
  call<T>(
    attempt: OutboundAttempt,
    handlers: {
      /** The real delivery. */
      deliver: () => Promise<T>;
      /** The answer a delivery's result records. */
      answerOf: (result: T) => OutboundAnswer;
      /** The result (or the error thrown) when a fault answers instead of the target. */
      faulted: (outcome: FaultOutcome) => T;
    },
  ): Promise<T>;
}

/** Calls kept, the oldest going first; bodies kept up to this size (as JSON text). */
const CALLS_KEPT = 1000;
export const BODY_KEPT = 64 * 1024;

const globOf = (pattern: string) =>
  new RegExp(
    `^${pattern
      .split('*')
      .map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&'))
      .join('.*')}$`,
  );

/** The record and the faults of one emulator's outbound calls, in memory. */
export class OutboundRecorder implements OutboundTap {
  private calls: OutboundCall[] = [];
  private faults: (OutboundFault & { matches?: RegExp })[] = [];
  private nextCall = 1;
  private nextFault = 1;
  private readonly clock: () => number;
  private readonly namespaceOf: () => string | undefined;

  /** `namespaceOf`: the namespace the call under way is made for, if any. */
  constructor(clock: () => number, namespaceOf: () => string | undefined = () => undefined) {
    this.clock = clock;
    this.namespaceOf = namespaceOf;
  }

  addFault(spec: OutboundFaultSpec): OutboundFault {
    const fault = { ...spec, id: this.nextFault++, remaining: spec.times };
    this.faults.push({ ...fault, ...(spec.target ? { matches: globOf(spec.target) } : {}) });
    return fault;
  }

  /** The faults of a namespace, or every fault. */
  listFaults(namespace?: string): OutboundFault[] {
    return this.faults
      .filter((f) => namespace === undefined || f.namespace === namespace)
      .map(({ matches: _, ...fault }) => fault);
  }

  /** Removes the faults of a namespace, or every fault. */
  clearFaults(namespace?: string): void {
    this.faults = namespace === undefined ? [] : this.faults.filter((f) => f.namespace !== namespace);
  }

  /** The record, oldest first: of a kind, to targets matching a pattern, whose body's `type` is `type` (a webhook's event type), after an id, the last `limit`. */
  list(filter: {
    namespace?: string;
    kind?: string;
    target?: string;
    type?: string;
    after?: number;
    limit: number;
  }): OutboundCall[] {
    const matches = filter.target ? globOf(filter.target) : undefined;
    return this.calls
      .filter(
        (c) =>
          (filter.namespace === undefined || c.namespace === filter.namespace) &&
          (!filter.kind || c.kind === filter.kind) &&
          (!matches || matches.test(c.target)) &&
          (!filter.type || (c.body as { type?: unknown } | null)?.type === filter.type) &&
          (filter.after === undefined || c.id > filter.after),
      )
      .slice(-filter.limit);
  }

  /** Forgets a namespace's calls, or every call. */
  clear(namespace?: string): void {
    this.calls = namespace === undefined ? [] : this.calls.filter((c) => c.namespace !== namespace);
  }

  private takeFault(attempt: OutboundAttempt, namespace: string | undefined): OutboundFault | undefined {
    const fault = this.faults.find(
      (f) =>
        f.remaining > 0 &&
        (f.namespace === undefined || f.namespace === namespace) &&
        (!f.kind || f.kind === attempt.kind) &&
        (!f.matches || f.matches.test(attempt.target)) &&
        (f.probability === undefined || Math.random() < f.probability),
    );
    if (!fault) return undefined;
    fault.remaining--;
    if (fault.remaining === 0) this.faults = this.faults.filter((f) => f !== fault);
    return fault;
  }

  async call<T>(
    attempt: OutboundAttempt,
    handlers: {
      deliver: () => Promise<T>;
      answerOf: (result: T) => OutboundAnswer;
      faulted: (outcome: FaultOutcome) => T;
    },
  ): Promise<T> {
    const at = new Date(this.clock()).toISOString();
    const started = performance.now();
    const namespace = this.namespaceOf();
    const fault = this.takeFault(attempt, namespace);
    const record = (answer: OutboundAnswer) => {
      const body = JSON.stringify(attempt.body ?? null).length <= BODY_KEPT ? attempt.body : '[not kept: over 64 KB]';
      this.calls.push({
        id: this.nextCall++,
        at,
        ...attempt,
        body,
        answer,
        duration_ms: Math.round(performance.now() - started),
        ...(fault ? { fault: fault.id } : {}),
        ...(namespace === undefined ? {} : { namespace }),
      });
      if (this.calls.length > CALLS_KEPT) this.calls.shift();
    };
    try {
      if (fault?.delay_ms) await new Promise((r) => setTimeout(r, fault.delay_ms));
      let result: T;
      if (fault?.refuse) result = handlers.faulted({ fault: fault.id, refused: true });
      else if (fault?.status !== undefined) result = handlers.faulted({ fault: fault.id, status: fault.status });
      else result = await handlers.deliver();
      const answer = handlers.answerOf(result);
      record(
        answer.body !== undefined && answer.body.length > BODY_KEPT
          ? { ...answer, body: answer.body.slice(0, BODY_KEPT) }
          : answer,
      );
      return result;
    } catch (err) {
      const status = fault?.status === undefined ? {} : { status: fault.status };
      record({ ...status, error: (err as Error)?.message ?? String(err) });
      throw err;
    }
  }
}
