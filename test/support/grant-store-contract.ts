// The GrantStore contract (src/store/gateway/grant-store.ts) as one suite any backend runs: pass a name, a
// function that opens a fresh, empty store, and one that opens the same records again (a restart; the store
// `open` answered last is closed first). Each test closes its store.
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, it } from 'node:test';
import type { GrantRow, GrantStore } from '../../src/store/gateway/grant-store.js';

export interface GrantStoreOpeners {
  open(): GrantStore | Promise<GrantStore>;
  reopen(): GrantStore | Promise<GrantStore>;
}

export function grantRow(n: number, extra: Partial<GrantRow> = {}): GrantRow {
  return { tokenSha256: n.toString(16).padStart(64, '0'), runId: `run-${n}`, issuedAt: 1_700_000_000_000 + n, holder: null, ...extra };
}

const HOLDER = JSON.stringify({ kind: 'run', runId: 'run-1', caller: 'alice', policy: { mode: 'allowlist', allow: ['pypi.org', '*.npmjs.org:8443'] }, budgetUsd: 0.5 });

export function grantStoreContract(name: string, openers: GrantStoreOpeners): void {
  describe(`GrantStore contract: ${name}`, () => {
    let store: GrantStore;
    beforeEach(async () => {
      store = await openers.open();
    });
    afterEach(() => store.close());

    const reopen = async () => {
      await store.close();
      store = await openers.reopen();
    };

    it('keeps nothing at first', async () => {
      assert.deepEqual(await store.all(), []);
    });

    it('answers every grant put, oldest first, then by run id', async () => {
      await store.put(grantRow(3, { issuedAt: 10 }));
      await store.put(grantRow(1, { issuedAt: 20 }));
      await store.put(grantRow(2, { issuedAt: 10, runId: 'run-0' }));
      assert.deepEqual((await store.all()).map((row) => row.runId), ['run-0', 'run-3', 'run-1']);
      assert.deepEqual((await store.all())[2], grantRow(1, { issuedAt: 20 }));
    });

    it('replaces the grant of a run issued again: one row per run, the new token', async () => {
      await store.put(grantRow(1, { holder: HOLDER }));
      await store.put(grantRow(2, { runId: 'run-1', issuedAt: 99 }));
      assert.deepEqual(await store.all(), [grantRow(2, { runId: 'run-1', issuedAt: 99 })]);
    });

    it('binds a holder, and unbinds it, by run', async () => {
      await store.put(grantRow(1));
      await store.put(grantRow(2));
      await store.setHolder('run-1', HOLDER);
      assert.deepEqual(await store.all(), [grantRow(1, { holder: HOLDER }), grantRow(2)]);
      await store.setHolder('run-1', null);
      assert.deepEqual(await store.all(), [grantRow(1), grantRow(2)]);
    });

    it('removes a run\'s grant only; unknown runs change nothing', async () => {
      await store.put(grantRow(1));
      await store.put(grantRow(2));
      await store.remove('run-1');
      await store.remove('run-unknown');
      await store.setHolder('run-unknown', HOLDER);
      assert.deepEqual(await store.all(), [grantRow(2)]);
    });

    it('refuses a token digest already kept for another run', async () => {
      await store.put(grantRow(1));
      await assert.rejects(async () => store.put(grantRow(1, { runId: 'run-other' })));
      assert.deepEqual(await store.all(), [grantRow(1)]);
    });

    it('keeps its grants across a reopen', async () => {
      await store.put(grantRow(1, { holder: HOLDER }));
      await store.put(grantRow(2));
      await reopen();
      assert.deepEqual(await store.all(), [grantRow(1, { holder: HOLDER }), grantRow(2)]);
    });

    it('refuses work once closed', async () => {
      await store.close();
      await assert.rejects(async () => store.put(grantRow(1)));
      await assert.rejects(async () => store.all());
      store = await openers.reopen();
    });
  });
}
