// The TokenBlacklist contract (src/store/blacklist/blacklist.ts) as one suite any backend runs: pass a name and a
// function that opens a fresh, empty blacklist. Each test closes its blacklist.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { TokenBlacklist } from '../../src/store/blacklist/blacklist.js';

export function blacklistContract(name: string, open: () => TokenBlacklist | Promise<TokenBlacklist>): void {
  describe(`TokenBlacklist contract: ${name}`, () => {
    let blacklist: TokenBlacklist;
    beforeEach(async () => {
      blacklist = await open();
    });
    afterEach(() => blacklist.close());

    it('does not know a jti that was never added', async () => {
      assert.equal(await blacklist.has('never-added'), false);
    });

    it('knows a jti once it is added', async () => {
      await blacklist.add('jti-1', Date.now() + 60_000);
      assert.equal(await blacklist.has('jti-1'), true);
      assert.equal(await blacklist.has('jti-2'), false);
    });

    it('accepts the same jti twice', async () => {
      await blacklist.add('jti-1', 2_000);
      await blacklist.add('jti-1', 1_000);
      assert.equal(await blacklist.has('jti-1'), true);
    });

    it('keeps the later expiry when a jti is added twice', async () => {
      await blacklist.add('jti-1', 5_000);
      await blacklist.add('jti-1', 1_000);
      assert.equal(await blacklist.removeExpired(2_000), 0);
      assert.equal(await blacklist.has('jti-1'), true);
    });

    it('keeps the later expiry when the same jti is added concurrently', async () => {
      await Promise.all([5_000, 1_000, 9_000, 3_000].map((expiry) => blacklist.add('jti-1', expiry)));
      assert.equal(await blacklist.removeExpired(8_999), 0);
      assert.equal(await blacklist.has('jti-1'), true);
      assert.equal(await blacklist.removeExpired(9_000), 1);
    });

    it('removes only entries expired at or before now and says how many', async () => {
      await blacklist.add('old-1', 1_000);
      await blacklist.add('old-2', 2_000);
      await blacklist.add('young', 3_001);
      assert.equal(await blacklist.removeExpired(2_000), 2);
      assert.equal(await blacklist.has('old-1'), false);
      assert.equal(await blacklist.has('old-2'), false);
      assert.equal(await blacklist.has('young'), true);
      assert.equal(await blacklist.removeExpired(2_000), 0);
    });

    it('treats jtis as exact strings', async () => {
      await blacklist.add('abc', 10_000);
      for (const other of ['ABC', 'abc ', 'ab', "abc' OR '1'='1", 'abc%', 'ab_']) assert.equal(await blacklist.has(other), false, other);
    });

    it('rejects lookups after close instead of answering "not blacklisted"', async () => {
      await blacklist.add('jti-1', Date.now() + 60_000);
      await blacklist.close();
      await assert.rejects(blacklist.has('jti-1'));
      await assert.rejects(blacklist.add('jti-2', 1));
    });
  });
}
