// Per-client token-bucket rate limiting (SERVICE_RATE_LIMIT_*). Each client gets a bucket of `burst`
// tokens refilled at `rps` per second, computed lazily from the elapsed time; a request takes one token
// or is refused with 429. Every response subject to the limiter carries X-RateLimit-Remaining.
//
// Decisions:
// - Nothing on the API listener is exempt, /health included: it is open and unauthenticated, so it is the
//   cheapest flood target, and a probe every few seconds stays far below any sensible rate. /metrics is
//   served by its own listener (metrics-server.ts), which the limiter does not cover.
// - The client is the TCP peer. X-Forwarded-For is believed only when the peer is a trusted proxy, and
//   then its leftmost entry is the client (the proxy must overwrite, not append to, what callers send).
// - IPv6 clients are limited per /64: one host usually owns a whole /64, so per-address buckets would
//   let it rotate addresses and never be limited. IPv4 clients are limited per address.
// - Buckets live in an LRU cache with a maximum size and a TTL equal to the time an empty bucket takes
//   to refill: an expired bucket is indistinguishable from a new one, so TTL eviction loses nothing, and
//   under a flood of distinct addresses memory stays bounded by maxBuckets (the least recently seen
//   clients then start again with a full bucket).
import { BlockList, isIP } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { LRUCache } from 'lru-cache';
import { ConfigError } from '../../config.js';
import { errors } from '../../errors.js';
import type { Metrics } from '../../metrics/metrics.js';

export const DEFAULT_MAX_BUCKETS = 10_000;
const UNKNOWN_CLIENT = 'unknown';

export interface RateLimitDeps {
  readonly rps: number;
  readonly burst: number;
  /** SERVICE_RATE_LIMIT_TRUSTED_PROXIES: IPv4/IPv6 addresses or CIDRs. */
  readonly trustedProxies: readonly string[];
  readonly metrics: Metrics;
  readonly maxBuckets?: number;
}

export interface TakeResult {
  readonly allowed: boolean;
  /** Whole tokens left after this request, floored at zero. */
  readonly remaining: number;
  /** When refused: milliseconds until one token is available again; 0 when allowed. */
  readonly retryAfterMs: number;
}

interface Bucket {
  tokens: number;
  updatedMs: number;
}

export interface TokenBucketOptions {
  readonly rps: number;
  readonly burst: number;
  readonly maxBuckets?: number;
  /** Monotonic milliseconds; injectable for tests. */
  readonly now?: () => number;
}

export class TokenBucketLimiter {
  private readonly rps: number;
  private readonly burst: number;
  private readonly now: () => number;
  private readonly buckets: LRUCache<string, Bucket>;

  constructor(options: TokenBucketOptions) {
    if (!(options.rps > 0) || !Number.isFinite(options.rps)) throw new Error(`rate limit: rps ${options.rps} is not a positive number`);
    if (!Number.isInteger(options.burst) || options.burst < 1) throw new Error(`rate limit: burst ${options.burst} is not a positive integer`);
    const maxBuckets = options.maxBuckets ?? DEFAULT_MAX_BUCKETS;
    if (!Number.isInteger(maxBuckets) || maxBuckets < 1) throw new Error(`rate limit: maxBuckets ${maxBuckets} is not a positive integer`);
    this.rps = options.rps;
    this.burst = options.burst;
    const now = options.now ?? (() => performance.now());
    this.now = now;
    this.buckets = new LRUCache<string, Bucket>({
      max: maxBuckets,
      ttl: Math.max(1, Math.ceil((options.burst / options.rps) * 1000)),
      perf: { now },
    });
  }

  /** Takes one token from `key`'s bucket. */
  take(key: string): TakeResult {
    const now = this.now();
    const bucket = this.buckets.get(key) ?? { tokens: this.burst, updatedMs: now };
    const elapsedSeconds = Math.max(0, now - bucket.updatedMs) / 1000;
    bucket.tokens = Math.min(this.burst, bucket.tokens + elapsedSeconds * this.rps);
    bucket.updatedMs = now;
    const allowed = bucket.tokens >= 1;
    if (allowed) bucket.tokens -= 1;
    this.buckets.set(key, bucket);
    return {
      allowed,
      remaining: Math.max(0, Math.floor(bucket.tokens)),
      retryAfterMs: allowed ? 0 : Math.ceil(((1 - bucket.tokens) / this.rps) * 1000),
    };
  }

  /** Buckets currently held (for tests and diagnostics). */
  get size(): number {
    return this.buckets.size;
  }
}

/** Builds the trusted-proxy set; an entry that is neither an IP address nor a CIDR stops the start. */
export function parseTrustedProxies(entries: readonly string[]): BlockList {
  const list = new BlockList();
  for (const entry of entries) {
    const [rawAddress = '', prefixText, extra] = entry.trim().split('/');
    const address = normaliseIp(rawAddress);
    const version = isIP(address);
    const family = version === 6 ? 'ipv6' : 'ipv4';
    const prefix = prefixText === undefined ? undefined : Number(prefixText);
    const valid =
      version !== 0 &&
      extra === undefined &&
      (prefix === undefined || (/^\d{1,3}$/.test(prefixText!) && prefix <= (version === 6 ? 128 : 32)));
    if (!valid) {
      throw new ConfigError('SERVICE_RATE_LIMIT_TRUSTED_PROXIES', `"${entry}" is not an IP address or CIDR (e.g. 10.0.0.0/8, fd00::/8)`);
    }
    if (prefix === undefined) list.addAddress(address, family);
    else list.addSubnet(address, prefix, family);
  }
  return list;
}

/** `::ffff:1.2.3.4` → `1.2.3.4`; lower case; `[::1]` → `::1`. */
export function normaliseIp(ip: string): string {
  const bare = ip.trim().replace(/^\[(.*)\]$/, '$1').toLowerCase();
  const mapped = /^::ffff:(\d{1,3}(?:\.\d{1,3}){3})$/.exec(bare);
  return mapped ? mapped[1]! : bare;
}

function isTrusted(ip: string, trusted: BlockList): boolean {
  const version = isIP(ip);
  if (version === 0) return false;
  return trusted.check(ip, version === 6 ? 'ipv6' : 'ipv4');
}

/**
 * The client address of a request: the TCP peer, unless the peer is a trusted proxy, in which case the
 * leftmost X-Forwarded-For entry (when it is a valid IP; otherwise the peer again).
 */
export function clientIp(peer: string | undefined, xff: string | readonly string[] | undefined, trusted: BlockList): string {
  const peerIp = normaliseIp(peer ?? '');
  if (isIP(peerIp) === 0) return UNKNOWN_CLIENT;
  if (xff === undefined || !isTrusted(peerIp, trusted)) return peerIp;
  const header = typeof xff === 'string' ? xff : xff[0];
  const forwarded = normaliseIp(header?.split(',')[0] ?? '');
  return isIP(forwarded) === 0 ? peerIp : forwarded;
}

/** The bucket a client address belongs to: the address for IPv4, its /64 network for IPv6. */
export function bucketKey(ip: string): string {
  return isIP(ip) === 6 ? ipv6Prefix64(ip) : ip;
}

function ipv6Prefix64(ip: string): string {
  let address = ip.split('%')[0]!;
  const embedded = /(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(address);
  if (embedded) {
    const [a, b, c, d] = embedded.slice(1).map(Number) as [number, number, number, number];
    address = `${address.slice(0, embedded.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = address.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups =
    tail === undefined ? headGroups : [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  return `${groups.slice(0, 4).map((group) => parseInt(group, 16).toString(16)).join(':')}::/64`;
}

export function registerRateLimit(app: FastifyInstance, deps: RateLimitDeps): void {
  const trusted = parseTrustedProxies(deps.trustedProxies);
  const limiter = new TokenBucketLimiter({ rps: deps.rps, burst: deps.burst, maxBuckets: deps.maxBuckets });
  app.addHook('onRequest', async (request, reply) => {
    const ip = clientIp(request.socket.remoteAddress, request.headers['x-forwarded-for'], trusted);
    const result = limiter.take(bucketKey(ip));
    reply.header('X-RateLimit-Remaining', String(result.remaining));
    if (!result.allowed) {
      deps.metrics.rateLimited.inc();
      reply.header('Retry-After', String(Math.max(1, Math.ceil(result.retryAfterMs / 1000))));
      throw errors.rateLimited();
    }
  });
}
