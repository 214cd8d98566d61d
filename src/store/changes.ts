import type pg from 'pg';
import { checkOut, type CheckedOut, type Queryable } from './pool.ts';

const CHANNEL = 'audience_changes';

type Listener = (id: string) => void;

/**
 * Tells every process of the program that some cached record changed, so that caches of
 * definitions, API keys and accounts stay right when several API processes share one database.
 * A change is announced inside the writing transaction (PostgreSQL delivers it on commit) and
 * applied to this process's caches at once.
 */
export class ChangeFeed {
  private listeners = new Map<string, Listener[]>();
  /** Those told only once the database delivers a change: after its transaction committed. */
  private committedListeners = new Map<string, Listener[]>();
  private listening: CheckedOut | undefined;
  private closed = false;
  private readonly pool: pg.Pool;

  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /**
   * Calls `listener` with the id of every changed record of `topic`, and with '*' after a lost
   * connection: at once for a change of this process (before its transaction commits), or with
   * `committed`, only once the database delivers it (after the commit: a listener that reads the
   * record then reads the change).
   */
  on(topic: string, listener: Listener, options: { committed?: boolean } = {}): void {
    const listeners = options.committed ? this.committedListeners : this.listeners;
    const list = listeners.get(topic) ?? [];
    list.push(listener);
    listeners.set(topic, list);
  }

  /** Announces within `tx` that record `id` of `topic` changed. */
  async publish(tx: Queryable, topic: string, id: string): Promise<void> {
    this.deliver(topic, id);
    await tx.query('select pg_notify($1, $2)', [CHANNEL, `${topic}:${id}`]);
  }

  /** Starts listening; call once at start-up. */
  async start(): Promise<void> {
    const listening = await checkOut(this.pool);
    this.listening = listening;
    const { client } = listening;
    client.on('notification', (msg) => {
      const payload = msg.payload ?? '';
      const at = payload.indexOf(':');
      if (at > 0) this.deliver(payload.slice(0, at), payload.slice(at + 1), true);
    });
    // The first error of the connection starts another; its later ones (of the same loss) do nothing.
    client.on('error', () => {
      if (this.listening === listening) this.reconnect();
    });
    await client.query(`listen ${CHANNEL}`);
  }

  private reconnect(): void {
    if (this.closed) return;
    this.listening?.release(true);
    this.listening = undefined;
    // Whatever changed while we were deaf is unknown: drop every cache.
    this.forgetAll();
    setTimeout(() => this.start().catch(() => this.reconnect()), 1000).unref();
  }

  /** Drops every cache that listens: after a change the feed cannot name (the emulator's reset). */
  forgetAll(): void {
    for (const topic of new Set([...this.listeners.keys(), ...this.committedListeners.keys()]))
      this.deliver(topic, '*', true);
  }

  private deliver(topic: string, id: string, committed = false): void {
    for (const listener of this.listeners.get(topic) ?? []) listener(id);
    if (committed) for (const listener of this.committedListeners.get(topic) ?? []) listener(id);
  }

  async close(): Promise<void> {
    this.closed = true;
    const listening = this.listening;
    this.listening = undefined;
    if (listening) {
      await listening.client.query(`unlisten ${CHANNEL}`).catch(() => {});
      listening.release();
    }
  }
}

/**
 * A read-through cache of records by id, dropped record by record through the change feed.
 * A load that started before a change is not kept, so a slow reader cannot store stale data.
 * Callers missing the same record at once share one load, so that a burst of requests on a
 * cold (or just dropped) record costs one load rather than one per request.
 */
export class RecordCache<V> {
  private values = new Map<string, V>();
  /** Loads under way; a change to a record forgets its load, so later callers load afresh. */
  private loading = new Map<string, Promise<V>>();
  private generation = 0;
  private readonly load: (id: string) => Promise<V>;

  constructor(feed: ChangeFeed, topic: string, load: (id: string) => Promise<V>) {
    this.load = load;
    feed.on(topic, (id) => this.drop(id));
  }

  async get(id: string): Promise<V> {
    const hit = this.values.get(id);
    if (hit !== undefined) return hit;
    return this.loading.get(id) ?? this.startLoad(id);
  }

  private startLoad(id: string): Promise<V> {
    const generation = this.generation;
    const done = () => {
      if (this.loading.get(id) === loaded) this.loading.delete(id);
    };
    const loaded: Promise<V> = this.load(id).then(
      (value) => {
        done();
        if (generation === this.generation) this.values.set(id, value);
        return value;
      },
      (err: unknown) => {
        done();
        throw err;
      },
    );
    this.loading.set(id, loaded);
    return loaded;
  }

  drop(id: string): void {
    this.generation++;
    if (id === '*') {
      this.values.clear();
      this.loading.clear();
    } else {
      this.values.delete(id);
      this.loading.delete(id);
    }
  }
}
