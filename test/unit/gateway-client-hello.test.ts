// The SNI reader of the egress proxy's CONNECT tunnels (src/gateway/client-hello.ts), fed the bytes real
// TLS clients send (captured from tls.connect by a local TCP server), whole, cut anywhere and re-framed over
// several records, and bytes that are not a ClientHello.
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import { parseClientHello } from '../../src/gateway/client-hello.js';

/** The first flight of a TLS client (its ClientHello records), as a server receives it. */
function captureClientHello(options: { servername?: string; maxVersion?: 'TLSv1.2' | 'TLSv1.3' }): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const server = createServer((socket) => {
      let bytes = Buffer.alloc(0);
      socket.on('data', (chunk: Buffer) => {
        bytes = Buffer.concat([bytes, chunk]);
        if (bytes.length >= 5 && bytes.length >= 5 + bytes.readUInt16BE(3)) {
          socket.destroy();
          server.close();
          resolve(bytes);
        }
      });
      socket.on('error', () => undefined);
    });
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      const client = tlsConnect({ host: '127.0.0.1', port, servername: options.servername ?? '', rejectUnauthorized: false, ...(options.maxVersion ? { maxVersion: options.maxVersion } : {}) });
      client.on('error', () => undefined);
    });
  });
}

/** The same handshake bytes, re-framed into records of at most `size` bytes each. */
function reframe(hello: Buffer, size: number): Buffer {
  const handshake = hello.subarray(5, 5 + hello.readUInt16BE(3));
  const records: Buffer[] = [];
  for (let offset = 0; offset < handshake.length; offset += size) {
    const fragment = handshake.subarray(offset, offset + size);
    const header = Buffer.from([22, 3, 1, 0, 0]);
    header.writeUInt16BE(fragment.length, 3);
    records.push(header, fragment);
  }
  return Buffer.concat(records);
}

describe('the server name of a real ClientHello', () => {
  let hello: Buffer;
  let helloTls12: Buffer;
  let helloWithoutSni: Buffer;
  before(async () => {
    [hello, helloTls12, helloWithoutSni] = await Promise.all([
      captureClientHello({ servername: 'Registry.Example.test' }),
      captureClientHello({ servername: 'pypi.org', maxVersion: 'TLSv1.2' }),
      captureClientHello({}),
    ]);
  });

  it('is read from a whole ClientHello (TLS 1.3 and 1.2 clients)', () => {
    assert.deepEqual(parseClientHello(hello), { sni: 'Registry.Example.test' });
    assert.deepEqual(parseClientHello(helloTls12), { sni: 'pypi.org' });
  });

  it('needs more bytes at every cut short of the whole ClientHello, and not one byte more', () => {
    for (let length = 0; length < hello.length; length++) {
      assert.equal(parseClientHello(hello.subarray(0, length)), 'need-more', `cut at ${length} of ${hello.length}`);
    }
  });

  it('is read from a ClientHello split over several records', () => {
    for (const size of [1, 7, 100, 512]) {
      const split = reframe(hello, size);
      assert.deepEqual(parseClientHello(split), { sni: 'Registry.Example.test' }, `records of ${size} bytes`);
      assert.equal(parseClientHello(split.subarray(0, split.length - 1)), 'need-more', `records of ${size} bytes, cut`);
    }
  });

  it('ignores what follows the ClientHello (a TLS 1.3 client may send change_cipher_spec and early data at once)', () => {
    const followed = Buffer.concat([hello, Buffer.from([20, 3, 3, 0, 1, 1]), Buffer.from('GET / HTTP/1.1\r\n')]);
    assert.deepEqual(parseClientHello(followed), { sni: 'Registry.Example.test' });
  });

  it('is absent when the client sends no SNI', () => {
    assert.equal(parseClientHello(helloWithoutSni), 'no-sni');
  });
});

describe('bytes that are not a ClientHello', () => {
  it('plain text protocols are not TLS from their first byte', () => {
    for (const text of ['GET / HTTP/1.1\r\nHost: x\r\n\r\n', 'SSH-2.0-OpenSSH_9.2\r\n', 'EHLO x\r\n', 'G']) {
      assert.equal(parseClientHello(Buffer.from(text)), 'not-tls', JSON.stringify(text));
    }
  });

  it('a record that is not a handshake, or a handshake that is not a ClientHello, is not TLS a tunnel may carry', () => {
    assert.equal(parseClientHello(Buffer.from([23, 3, 3, 0, 4, 1, 2, 3, 4])), 'not-tls', 'application data first');
    assert.equal(parseClientHello(Buffer.from([22, 3, 3, 0, 4, 2, 0, 0, 0])), 'not-tls', 'a ServerHello');
    assert.equal(parseClientHello(Buffer.from([22, 2, 0, 0, 4, 1, 0, 0, 0])), 'not-tls', 'record version 2.0');
    assert.equal(parseClientHello(Buffer.from([22, 3, 3, 0x48, 0x01])), 'not-tls', 'a record longer than 16 KiB');
  });

  it('a ClientHello whose inner lengths do not add up is not TLS', async () => {
    const hello = await captureClientHello({ servername: 'a.example' });
    const broken = Buffer.from(hello);
    // The session id length (after the 5-byte record header, 4-byte handshake header, version and random) made huge.
    broken[5 + 4 + 2 + 32] = 0xff;
    assert.equal(parseClientHello(broken), 'not-tls');
  });

  it('a non-TLS record after the first handshake record, before the ClientHello is whole, is not TLS', async () => {
    const hello = await captureClientHello({ servername: 'a.example' });
    const split = reframe(hello, 50);
    const interrupted = Buffer.concat([split.subarray(0, 55), Buffer.from('GET / HTTP/1.1\r\n')]);
    assert.equal(parseClientHello(interrupted), 'not-tls');
  });
});
