// Blank workspace disks made ahead (runtime/spare-workspace-disks.ts): as many as asked, handed out once,
// made again a moment after one is taken, and all removed at close, also one still being made then.
import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { SpareWorkspaceDisks } from '../../src/runtime/spare-workspace-disks.js';
import type { MountedDisk, WorkspaceDisks } from '../../src/runtime/workspace-disks.js';

function fakeDisks() {
  const mounted = new Set<string>();
  const removed: string[] = [];
  let gate: Promise<void> = Promise.resolve();
  const disks = {
    create: async (id: string): Promise<MountedDisk> => {
      await gate;
      mounted.add(id);
      return { id, mountPoint: `/w/${id}`, view: `/w/${id}.view`, release: () => undefined };
    },
    remove: async (id: string) => {
      mounted.delete(id);
      removed.push(id);
    },
  } as unknown as WorkspaceDisks;
  return { disks, mounted, removed, hold: (until: Promise<void>) => (gate = until) };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('SpareWorkspaceDisks', () => {
  it('keeps the asked number ready, hands each out once, and makes the next a moment later', async (context) => {
    context.mock.timers.enable({ apis: ['setTimeout'] });
    const fake = fakeDisks();
    const spares = new SpareWorkspaceDisks(fake.disks, 2);
    assert.equal(spares.takeSpare(), undefined, 'none before start');
    spares.start();
    await settle();
    assert.equal(fake.mounted.size, 2);
    const first = spares.takeSpare();
    const second = spares.takeSpare();
    assert.ok(first && second && first.id !== second.id);
    assert.equal(spares.takeSpare(), undefined, 'both taken');
    await settle();
    assert.equal(fake.mounted.size, 2, 'nothing made while the run that took one starts');
    context.mock.timers.tick(1_000);
    await settle();
    assert.equal(fake.mounted.size, 4, 'made again a second later');
    await spares.close();
    assert.equal(fake.removed.length, 2, 'the two ready spares removed at close');
  });

  it('removes at close a spare still being made then', async () => {
    const fake = fakeDisks();
    let finish!: () => void;
    fake.hold(new Promise<void>((resolve) => (finish = resolve)));
    const spares = new SpareWorkspaceDisks(fake.disks, 1);
    spares.start();
    const closing = spares.close();
    finish();
    await closing;
    assert.equal(fake.mounted.size, 0);
    assert.equal(fake.removed.length, 1);
  });
});
