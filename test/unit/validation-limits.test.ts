import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { checkCpuShares, checkCpus, checkDisk, checkDuration, checkMemory, validateHooksTimeout, validateLimits } from '../../src/core/validation/limits.js';
import { refused } from './support/refused.js';

const limits = loadConfig({
  SERVICE_AUTH_ENABLED: 'false',
  SERVICE_AGENT_MAX_MEMORY: '8g',
  SERVICE_AGENT_MAX_DISK: '20g',
  SERVICE_AGENT_MAX_CPUS: '4',
  SERVICE_AGENT_MAX_TIMEOUT: '4h',
}).agent;

describe('memory', () => {
  const allowed: [string, number][] = [
    ['512m', 512 * 1024 ** 2], ['2g', 2 * 1024 ** 3], ['2G', 2 * 1024 ** 3], ['512mb', 512 * 1024 ** 2], ['6m', 6 * 1024 ** 2],
    ['8g', 8 * 1024 ** 3], ['1048576k', 1024 ** 3], ['6291456b', 6 * 1024 ** 2],
  ];
  for (const [text, bytes] of allowed) it(`allows ${text}`, () => assert.deepEqual(checkMemory(text, limits), { bytes, text }));

  const rejected: [string, RegExp][] = [
    ['0m', /is not a memory size/], ['-1g', /is not a memory size/], ['512', /is not a memory size/], ['512x', /is not a memory size/],
    ['1.5g', /is not a memory size/], ['512 m', /is not a memory size/], [' 512m', /is not a memory size/], ['m', /is not a memory size/],
    ['', /is not a memory size/], ['512mm', /is not a memory size/], ['0x200m', /is not a memory size/], ['1e3m', /is not a memory size/],
    ['99999999999999999t', /is not a memory size/], ['5m', /below the minimum of 6m/], ['1k', /below the minimum/],
    ['8193m', /above the maximum of 8g \(SERVICE_AGENT_MAX_MEMORY\)/], ['1t', /above the maximum/],
  ];
  for (const [text, pattern] of rejected) {
    it(`refuses ${JSON.stringify(text)}`, () => assert.throws(() => checkMemory(text, limits), refused(new RegExp(`^container\\.memory: .*${pattern.source}`))));
  }
  it('defaults to SERVICE_AGENT_DEFAULT_MEMORY', () => assert.deepEqual(checkMemory(undefined, limits), { bytes: 512 * 1024 ** 2, text: '512m' }));
});

describe('disk', () => {
  const allowed: [string, number][] = [['1g', 1024 ** 3], ['64m', 64 * 1024 ** 2], ['20g', 20 * 1024 ** 3], ['512M', 512 * 1024 ** 2]];
  for (const [text, bytes] of allowed) it(`allows ${text}`, () => assert.deepEqual(checkDisk(text, limits), { bytes, text }));

  const rejected: [string, RegExp][] = [
    ['0g', /is not a size/], ['1.5g', /is not a size/], ['-1g', /is not a size/], ['', /is not a size/], ['2', /is not a size/],
    ['63m', /below the minimum of 64m/], ['20481m', /above the maximum of 20g \(SERVICE_AGENT_MAX_DISK\)/], ['1t', /above the maximum/],
  ];
  for (const [text, pattern] of rejected) {
    it(`refuses ${JSON.stringify(text)}`, () => assert.throws(() => checkDisk(text, limits), refused(new RegExp(`^container\\.disk: .*${pattern.source}`))));
  }
  it('defaults to SERVICE_AGENT_DEFAULT_DISK', () => assert.deepEqual(checkDisk(undefined, limits), { bytes: 2 * 1024 ** 3, text: '2g' }));
  it('refuses a default above the maximum at start', () => {
    assert.throws(() => loadConfig({ SERVICE_AUTH_ENABLED: 'false', SERVICE_AGENT_DEFAULT_DISK: '4g', SERVICE_AGENT_MAX_DISK: '2g' }), /SERVICE_AGENT_DEFAULT_DISK/);
  });
});

describe('cpus', () => {
  const allowed: [string | number, number][] = [['0.5', 0.5], ['2', 2], ['4', 4], ['0.01', 0.01], ['1.25', 1.25], [0.5, 0.5], [2, 2], [4, 4]];
  for (const [value, cpus] of allowed) it(`allows ${JSON.stringify(value)}`, () => assert.equal(checkCpus(value, limits), cpus));

  const rejected: [string | number, RegExp][] = [
    ['0', /is not a CPU count/], [0, /is not a CPU count/], ['-1', /is not a CPU count/], [-1, /is not a CPU count/],
    ['1.2345', /is not a CPU count/], [0.1 + 0.2, /is not a CPU count/], ['abc', /is not a CPU count/], ['', /is not a CPU count/],
    ['1e2', /is not a CPU count/], [Number.NaN, /is not a CPU count/], [Number.POSITIVE_INFINITY, /is not a CPU count/], [1e21, /is not a CPU count/],
    [' 1', /is not a CPU count/], ['1,5', /is not a CPU count/], ['0.001', /below the minimum of 0\.01/], ['0.009', /below the minimum/],
    ['4.001', /above the maximum of 4 \(SERVICE_AGENT_MAX_CPUS\)/], [5, /above the maximum/],
  ];
  for (const [value, pattern] of rejected) {
    it(`refuses ${JSON.stringify(value)}`, () => assert.throws(() => checkCpus(value, limits), refused(new RegExp(`^container\\.cpus: .*${pattern.source}`))));
  }
  it('defaults to SERVICE_AGENT_DEFAULT_CPUS', () => assert.equal(checkCpus(undefined, limits), 1));
});

describe('cpu_shares', () => {
  for (const value of [2, 1024, 262144]) it(`allows ${value}`, () => assert.equal(checkCpuShares(value, limits), value));
  for (const value of [1, 0, -1, 262145, 1.5, Number.NaN]) {
    it(`refuses ${value}`, () => assert.throws(() => checkCpuShares(value, limits), refused(/^container\.cpu_shares: .* is not a whole number from 2 to 262144$/)));
  }
  it('defaults to 1024', () => assert.equal(checkCpuShares(undefined, limits), 1024));
});

describe('timeout', () => {
  const allowed: [string, number][] = [['5m', 300_000], ['1h', 3_600_000], ['1h30m', 5_400_000], ['1s', 1000], ['4h', 14_400_000], ['90s', 90_000], ['1000ms', 1000]];
  for (const [text, ms] of allowed) {
    it(`allows ${text}`, () => assert.deepEqual(checkDuration(text, 'container.timeout', limits.defaultTimeoutMs, limits), { ms, text }));
  }
  const rejected: [string, RegExp][] = [
    ['0s', /is not a duration/], ['0m', /is not a duration/], ['-5m', /is not a duration/], ['5', /is not a duration/], ['5 m', /is not a duration/],
    ['5min', /is not a duration/], ['5M', /is not a duration/], ['1.5h', /is not a duration/], ['', /is not a duration/], ['m', /is not a duration/],
    ['9999999999h', /is not a duration/], ['999ms', /below the minimum of 1s/], ['4h1s', /above the maximum of 4h \(SERVICE_AGENT_MAX_TIMEOUT\)/],
    ['1d', /above the maximum/],
  ];
  for (const [text, pattern] of rejected) {
    it(`refuses ${JSON.stringify(text)}`, () => {
      assert.throws(() => checkDuration(text, 'container.timeout', limits.defaultTimeoutMs, limits), refused(new RegExp(`^container\\.timeout: .*${pattern.source}`)));
    });
  }
});

describe('validateLimits and hooks_timeout', () => {
  it('applies every default', () => {
    assert.deepEqual(validateLimits(undefined, limits), {
      memoryBytes: 512 * 1024 ** 2, memoryText: '512m', diskBytes: 2 * 1024 ** 3, diskText: '2g', cpus: 1, cpuShares: 1024, timeoutMs: 1_800_000, timeoutText: '30m',
    });
  });
  it('keeps the texts as written', () => {
    const plan = validateLimits({ memory: '2G', disk: '1G', cpus: '0.5', cpu_shares: 512, timeout: '1h' }, limits);
    assert.deepEqual(plan, { memoryBytes: 2 * 1024 ** 3, memoryText: '2G', diskBytes: 1024 ** 3, diskText: '1G', cpus: 0.5, cpuShares: 512, timeoutMs: 3_600_000, timeoutText: '1h' });
  });
  it('defaults hooks_timeout to 5m', () => assert.equal(validateHooksTimeout(undefined, limits), 300_000));
  it('bounds the hooks_timeout default by the maximum', () => {
    const small = loadConfig({ SERVICE_AUTH_ENABLED: 'false', SERVICE_AGENT_DEFAULT_TIMEOUT: '1m', SERVICE_AGENT_MAX_TIMEOUT: '2m' }).agent;
    assert.equal(validateHooksTimeout(undefined, small), 120_000);
  });
  it('parses hooks_timeout', () => assert.equal(validateHooksTimeout('30s', limits), 30_000));
  it('refuses a hooks_timeout over the maximum, naming the field', () => {
    assert.throws(() => validateHooksTimeout('5h', limits), refused(/^container\.lifecycle\.hooks_timeout: "5h" is above the maximum of 4h/));
  });
  it('refuses a malformed hooks_timeout', () => {
    assert.throws(() => validateHooksTimeout('soon', limits), refused(/^container\.lifecycle\.hooks_timeout: "soon" is not a duration/));
  });
});
