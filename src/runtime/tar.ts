// The smallest tar writer Berth needs: a few regular files, for Podman's archive upload (input files
// such as the prompt are copied into a created container, so they never pass through argv or a shell).
import type { InputFile } from './container-runtime.js';

const BLOCK = 512;

function header(name: string, size: number, mode: number): Buffer {
  const block = Buffer.alloc(BLOCK);
  if (Buffer.byteLength(name) > 100) throw new Error(`tar entry name too long: ${name}`);
  block.write(name, 0, 100, 'utf8');
  block.write(`${mode.toString(8).padStart(7, '0')}\0`, 100, 'ascii');
  block.write('0000000\0', 108, 'ascii'); // uid: Podman chowns uploads to the container's user
  block.write('0000000\0', 116, 'ascii'); // gid
  block.write(`${size.toString(8).padStart(11, '0')}\0`, 124, 'ascii');
  block.write(`${Math.floor(Date.now() / 1000).toString(8).padStart(11, '0')}\0`, 136, 'ascii');
  block.write('        ', 148, 'ascii'); // checksum field counts as spaces while summing
  block.write('0', 156, 'ascii');
  block.write('ustar\0', 257, 'ascii');
  block.write('00', 263, 'ascii');
  let sum = 0;
  for (const byte of block) sum += byte;
  block.write(`${sum.toString(8).padStart(6, '0')}\0 `, 148, 'ascii');
  return block;
}

/** Paths are relative to the directory the archive is extracted into. */
export function tarFiles(files: readonly InputFile[]): Buffer {
  const parts: Buffer[] = [];
  for (const file of files) {
    parts.push(header(file.path, file.content.length, file.mode), file.content);
    const padding = (BLOCK - (file.content.length % BLOCK)) % BLOCK;
    parts.push(Buffer.alloc(padding));
  }
  parts.push(Buffer.alloc(BLOCK * 2));
  return Buffer.concat(parts);
}
