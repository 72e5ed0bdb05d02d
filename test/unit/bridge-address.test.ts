// Fixing a bridge's hardware address (runtime/podman/bridge-address.ts) against a fake /sys/class/net:
// set once to its current value, left alone once set, skipped where the bridge is not in this namespace,
// and a failure warned about once. The real bridge is tested in test/integration/bridge-address.test.ts.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BridgeAddresses } from '../../src/runtime/podman/bridge-address.js';

/** Runs `use` with a fake /sys/class/net holding these interfaces, removed afterwards. */
async function withSysfs(interfaces: Record<string, { type: string; address: string }>, use: (root: string) => Promise<void>): Promise<void> {
  const root = await mkdtemp(join(tmpdir(), 'berth-unit-sysfs-'));
  try {
    for (const [name, { type, address }] of Object.entries(interfaces)) {
      await mkdir(join(root, name));
      await writeFile(join(root, name, 'addr_assign_type'), `${type}\n`);
      await writeFile(join(root, name, 'address'), `${address}\n`);
    }
    await use(root);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
}

function harness(sysfs: string, interfaceOf: Record<string, string | undefined>, fail = false) {
  const set: [string, string][] = [];
  const warnings: string[] = [];
  const lookups: string[] = [];
  const bridges = new BridgeAddresses({
    sysfs,
    interfaceOf: async (network) => {
      lookups.push(network);
      return interfaceOf[network];
    },
    setAddress: async (name, address) => {
      if (fail) throw new Error('Operation not permitted');
      set.push([name, address]);
    },
    warn: (_details, message) => warnings.push(message),
  });
  return { bridges, set, warnings, lookups };
}

test('a bridge whose address the kernel chose gets that same address set explicitly', async () => {
  await withSysfs({ podman0: { type: '1', address: '26:32:b5:8b:5a:dd' } }, async (sysfs) => {
    const { bridges, set, warnings } = harness(sysfs, { podman: 'podman0' });
    await bridges.pin(['podman']);
    assert.deepEqual(set, [['podman0', '26:32:b5:8b:5a:dd']]);
    assert.deepEqual(warnings, []);
  });
});

test('a bridge whose address is set already is left alone, and its interface is looked up once', async () => {
  await withSysfs({ podman0: { type: '3', address: '26:32:b5:8b:5a:dd' } }, async (sysfs) => {
    const { bridges, set, lookups } = harness(sysfs, { podman: 'podman0' });
    await bridges.pin(['podman']);
    await bridges.pin(['podman']);
    assert.deepEqual(set, []);
    assert.deepEqual(lookups, ['podman']);
  });
});

test('networks without a host interface here, and unsafe interface names, are skipped', async () => {
  await withSysfs({}, async (sysfs) => {
    const { bridges, set, warnings } = harness(sysfs, { rootless: 'podman0', macvlan: undefined, odd: '../../etc' });
    await bridges.pin(['rootless', 'macvlan', 'odd']);
    assert.deepEqual(set, []);
    assert.deepEqual(warnings, []);
  });
});

test('a failure to set the address is warned about once and not retried at every start', async () => {
  await withSysfs({ podman0: { type: '1', address: '02:00:00:00:00:01' } }, async (sysfs) => {
    const { bridges, warnings } = harness(sysfs, { podman: 'podman0' }, true);
    await bridges.pin(['podman']);
    await bridges.pin(['podman']);
    assert.equal(warnings.length, 1);
    assert.match(warnings[0]!, /could not be fixed/);
  });
});

test('a removed network is looked up again: its interface name may belong to another network by then', async () => {
  await withSysfs({ podman3: { type: '3', address: '02:00:00:00:00:03' } }, async (sysfs) => {
    const { bridges, lookups } = harness(sysfs, { stack: 'podman3' });
    await bridges.pin(['stack']);
    bridges.forget('stack');
    await bridges.pin(['stack']);
    assert.deepEqual(lookups, ['stack', 'stack']);
  });
});
