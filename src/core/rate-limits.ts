import type { Redis } from 'ioredis';
import type { Clock } from './clock.ts';

export interface Taken {
  ok: boolean;
  /** Whole seconds until one more request fits. */
  retryAfter: number;
}

/** Token buckets holding at most `limit` tokens, refilled at `limit` per `windowMs` (SPEC §8). */
export interface Buckets {
  take(key: string, limit: number, windowMs: number): Promise<Taken>;
  /** Puts back one token taken from bucket `key` (never above `limit`): for a request that turned out not to count. */
  giveBack(key: string, limit: number, windowMs: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * The tokens of a bucket now: refilled for the time passed and, when the limit was changed since,
 * moved by the change, so that a raised limit serves at once and a lowered one binds at once.
 */
function refill(
  s: { tokens: number; at: number; limit: number },
  now: number,
  limit: number,
  windowMs: number,
): number {
  const tokens = limit > s.limit ? s.tokens + (limit - s.limit) : Math.min(s.tokens, limit);
  return Math.min(limit, tokens + ((now - s.at) * limit) / windowMs);
}

function retryAfter(tokens: number, limit: number, windowMs: number): number {
  return Math.max(1, Math.ceil(((1 - tokens) * windowMs) / limit / 1000));
}

/** Buckets in this process's memory: right when one process serves the API. */
export class MemoryBuckets implements Buckets {
  private readonly state = new Map<string, { tokens: number; at: number; limit: number }>();
  private readonly clock: Clock;
  constructor(clock: Clock) {
    this.clock = clock;
  }

  async take(key: string, limit: number, windowMs: number): Promise<Taken> {
    const now = this.clock();
    const s = this.state.get(key);
    const tokens = s ? refill(s, now, limit, windowMs) : limit;
    if (this.state.size > 100_000 && !s) this.state.clear();
    if (tokens >= 1) {
      this.state.set(key, { tokens: tokens - 1, at: now, limit });
      return { ok: true, retryAfter: 0 };
    }
    this.state.set(key, { tokens, at: now, limit });
    return { ok: false, retryAfter: retryAfter(tokens, limit, windowMs) };
  }

  /** Every bucket full again (the emulator's reset). */
  clear(): void {
    this.state.clear();
  }

  async giveBack(key: string, limit: number, windowMs: number): Promise<void> {
    const now = this.clock();
    const s = this.state.get(key);
    if (s) this.state.set(key, { tokens: Math.min(limit, refill(s, now, limit, windowMs) + 1), at: now, limit });
  }

  async close(): Promise<void> {}
}

// One atomic step of a token bucket; returns the tokens left, negative when refused.
const TAKE = `
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'at', 'limit')
local tokens = limit
if s[1] then
  tokens = tonumber(s[1])
  local before = tonumber(s[3] or limit)
  if limit > before then tokens = tokens + (limit - before) else tokens = math.min(tokens, limit) end
  tokens = math.min(limit, tokens + (now - tonumber(s[2])) * limit / window)
end
local ok = 0
if tokens >= 1 then tokens = tokens - 1; ok = 1 end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now), 'limit', tostring(limit))
redis.call('PEXPIRE', KEYS[1], window * 2)
return {ok, tostring(tokens)}
`;

// One token put back into a bucket that exists, refilled first as TAKE does, never above the limit.
const GIVE_BACK = `
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local s = redis.call('HMGET', KEYS[1], 'tokens', 'at', 'limit')
if not s[1] then return 0 end
local tokens = tonumber(s[1])
local before = tonumber(s[3] or limit)
if limit > before then tokens = tokens + (limit - before) else tokens = math.min(tokens, limit) end
tokens = math.min(limit, tokens + (now - tonumber(s[2])) * limit / window + 1)
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(now), 'limit', tostring(limit))
redis.call('PEXPIRE', KEYS[1], window * 2)
return 1
`;

/** Buckets in Redis (`REDIS_URL`): several API processes share one budget per account. */
export class RedisBuckets implements Buckets {
  private readonly redis: Redis;
  private readonly clock: Clock;
  /** ioredis is loaded here, only by a process with `REDIS_URL` (about 2 MB of heap otherwise idle). */
  static async connect(url: string, clock: Clock): Promise<RedisBuckets> {
    const { Redis } = await import('ioredis');
    return new RedisBuckets(new Redis(url, { maxRetriesPerRequest: 2, lazyConnect: false }), clock);
  }

  private constructor(redis: Redis, clock: Clock) {
    this.redis = redis;
    this.clock = clock;
  }

  async take(key: string, limit: number, windowMs: number): Promise<Taken> {
    const [ok, tokens] = (await this.redis.eval(TAKE, 1, `audience:rate:${key}`, limit, windowMs, this.clock())) as [
      number,
      string,
    ];
    return ok === 1
      ? { ok: true, retryAfter: 0 }
      : { ok: false, retryAfter: retryAfter(Number(tokens), limit, windowMs) };
  }

  async giveBack(key: string, limit: number, windowMs: number): Promise<void> {
    await this.redis.eval(GIVE_BACK, 1, `audience:rate:${key}`, limit, windowMs, this.clock());
  }

  async close(): Promise<void> {
    await this.redis.quit().catch(() => {});
  }
}
