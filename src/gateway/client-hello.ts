// The server name a TLS client asks for (SNI), read from the first bytes a client sends through a CONNECT
// tunnel. The proxy lets a tunnel through only when they are a TLS ClientHello naming the host the CONNECT
// named: raw TCP (anything not TLS) is refused, and so is a tunnel to an allowed host's address that asks
// that server for another name (domain fronting through a shared front end).
//
// Wire format (RFC 8446 §5.1, §4.1.2; RFC 6066 §3): records of [type 1][version 2][length 2][fragment]; the
// handshake messages inside fragments of type 22 may span several records. The ClientHello is handshake
// type 1: [length 3][version 2][random 32][session id 1+n][cipher suites 2+n][compression 1+n][extensions 2+n],
// and the server_name extension (type 0) holds a list of [name type 1][length 2][name], type 0 = host name.

export type ClientHelloResult = 'need-more' | 'not-tls' | 'no-sni' | { readonly sni: string };

const RECORD_HANDSHAKE = 22;
const HANDSHAKE_CLIENT_HELLO = 1;
const EXTENSION_SERVER_NAME = 0;
const NAME_TYPE_HOST = 0;
/** A plaintext record's largest fragment (RFC 8446 §5.1: 2^14). */
const MAX_FRAGMENT = 16_384;

/** Reads the SNI of the ClientHello at the start of `data` (everything the client sent so far). */
export function parseClientHello(data: Buffer): ClientHelloResult {
  const hello = clientHelloBody(data);
  return typeof hello === 'string' ? hello : serverNameOf(hello);
}

/**
 * The ClientHello's body, joined from the leading handshake records. Only what precedes its end is read: a
 * TLS 1.3 client may follow it at once with other records (change_cipher_spec, early data).
 */
function clientHelloBody(data: Buffer): Buffer | 'need-more' | 'not-tls' {
  const fragments: Buffer[] = [];
  let joined = 0;
  let offset = 0;
  for (;;) {
    if (data.length <= offset) return 'need-more';
    if (data[offset] !== RECORD_HANDSHAKE) return 'not-tls';
    if (data.length < offset + 5) return 'need-more';
    // Record versions are 3.1 (TLS 1.0, what a ClientHello record says) to 3.4; 3.0 is SSL 3.
    const major = data[offset + 1]!;
    const minor = data[offset + 2]!;
    const length = data.readUInt16BE(offset + 3);
    if (major !== 3 || minor > 4 || length === 0 || length > MAX_FRAGMENT) return 'not-tls';
    const fragment = data.subarray(offset + 5, Math.min(data.length, offset + 5 + length));
    fragments.push(fragment);
    joined += fragment.length;
    const handshake = fragments.length === 1 ? fragment : Buffer.concat(fragments, joined);
    if (handshake.length >= 1 && handshake[0] !== HANDSHAKE_CLIENT_HELLO) return 'not-tls';
    if (handshake.length >= 4) {
      const helloLength = handshake.readUIntBE(1, 3);
      if (handshake.length >= 4 + helloLength) return handshake.subarray(4, 4 + helloLength);
    }
    if (fragment.length < length) return 'need-more';
    offset += 5 + length;
  }
}

/** A bounds-checked reader: every read past the end throws Malformed. */
class Reader {
  private offset = 0;
  constructor(private readonly bytes: Buffer) {}

  get remaining(): number {
    return this.bytes.length - this.offset;
  }

  skip(count: number): void {
    if (count > this.remaining) throw new Malformed();
    this.offset += count;
  }

  uint(size: 1 | 2): number {
    if (size > this.remaining) throw new Malformed();
    const value = this.bytes.readUIntBE(this.offset, size);
    this.offset += size;
    return value;
  }

  /** A length-prefixed vector (the prefix `size` bytes long). */
  vector(size: 1 | 2): Reader {
    const length = this.uint(size);
    if (length > this.remaining) throw new Malformed();
    const inner = new Reader(this.bytes.subarray(this.offset, this.offset + length));
    this.offset += length;
    return inner;
  }

  text(): string {
    return this.bytes.subarray(this.offset).toString('latin1');
  }
}

class Malformed extends Error {}

function serverNameOf(hello: Buffer): ClientHelloResult {
  try {
    const reader = new Reader(hello);
    reader.skip(2 + 32); // legacy_version, random
    reader.vector(1); // legacy_session_id
    const suites = reader.vector(2);
    if (suites.remaining === 0 || suites.remaining % 2 !== 0) return 'not-tls';
    if (reader.vector(1).remaining === 0) return 'not-tls'; // legacy_compression_methods
    if (reader.remaining === 0) return 'no-sni'; // no extensions at all
    const extensions = reader.vector(2);
    while (extensions.remaining > 0) {
      const type = extensions.uint(2);
      const body = extensions.vector(2);
      if (type !== EXTENSION_SERVER_NAME) continue;
      const names = body.vector(2);
      while (names.remaining > 0) {
        const nameType = names.uint(1);
        const name = names.vector(2);
        // RFC 6066: a host name is ASCII, without a trailing dot; anything else is no name we could compare.
        if (nameType === NAME_TYPE_HOST) {
          const text = name.text();
          return /^[\x21-\x7e]{1,253}$/.test(text) ? { sni: text } : 'not-tls';
        }
      }
      return 'no-sni';
    }
    return 'no-sni';
  } catch (error) {
    if (error instanceof Malformed) return 'not-tls';
    throw error;
  }
}
