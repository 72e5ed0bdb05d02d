// Tars built entry by entry for the archive tests: tar-stream writes whatever header it is given, hostile
// ones included (absolute names, `..`, links out, devices, setuid bits), which is the point.
import { pack } from 'tar-stream';

export type TarItem = {
  name: string;
  type?: 'file' | 'directory' | 'symlink' | 'link' | 'character-device' | 'block-device' | 'fifo';
  mode?: number;
  content?: Buffer | string;
  linkname?: string;
};

export async function tarOf(items: readonly TarItem[]): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  const ended = new Promise<void>((resolve, reject) => {
    p.on('data', (chunk) => chunks.push(Buffer.from(chunk as Uint8Array)));
    p.on('end', () => resolve());
    p.on('error', reject);
  });
  for (const item of items) {
    const content = item.content === undefined ? undefined : Buffer.from(item.content);
    await new Promise<void>((resolve, reject) => {
      const header = {
        name: item.name,
        type: item.type ?? 'file',
        mode: item.mode ?? (item.type === 'directory' ? 0o755 : 0o644),
        // A foreign owner: Berth must not keep it.
        uid: 4242,
        gid: 4242,
        ...(item.linkname !== undefined ? { linkname: item.linkname } : {}),
        ...(item.type === 'character-device' ? { devmajor: 1, devminor: 3 } : {}),
      };
      const done = (error?: Error | null) => (error ? reject(error) : resolve());
      if (content !== undefined) p.entry(header, content, done);
      else (p.entry(header, done) as unknown as NodeJS.WritableStream).end();
    });
  }
  p.finalize();
  await ended;
  return Buffer.concat(chunks);
}
