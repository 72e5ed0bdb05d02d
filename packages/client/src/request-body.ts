// What a raw upload (a workspace file, an archive) may be, and how it becomes a fetch body without being
// read into memory first: bytes and text are sent as they are; a Blob (a browser's File) is read by fetch
// as it sends; a web ReadableStream or any async iterable of bytes (a Node Readable, fs.createReadStream)
// is streamed, chunk by chunk, as fast as the connection takes it.

/** A body for PUT …/files/{path} and POST …/archive. */
export type UploadBody = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>;

/** The RequestInit fields that send `body`: a streamed body needs `duplex: 'half'` (fetch's rule). */
export function uploadInit(body: UploadBody): { body: BodyInit; duplex?: 'half'; streamed: boolean } {
  if (typeof body === 'string' || body instanceof Uint8Array || body instanceof ArrayBuffer || isBlob(body)) {
    return { body: body as BodyInit, streamed: false };
  }
  const stream = body instanceof ReadableStream ? body : streamOf(body);
  return { body: stream, duplex: 'half', streamed: true };
}

function isBlob(value: unknown): value is Blob {
  return typeof Blob !== 'undefined' && value instanceof Blob;
}

/** A web stream pulling from an async iterable: one chunk read per chunk the connection asks for. */
function streamOf(source: AsyncIterable<Uint8Array>): ReadableStream<Uint8Array> {
  const iterator = source[Symbol.asyncIterator]();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      const { value, done } = await iterator.next();
      if (done) controller.close();
      // A Node Buffer is a Uint8Array; a string chunk (a stream in text mode) is sent as UTF-8.
      else controller.enqueue(typeof value === 'string' ? new TextEncoder().encode(value) : value);
    },
    async cancel(reason) {
      await iterator.return?.(reason);
    },
  });
}
