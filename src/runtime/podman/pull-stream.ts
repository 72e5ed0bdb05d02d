// Podman's pull endpoint answers 200 at once and then streams JSON lines: progress (`stream`), at most
// one `error`, and on success a last line with the image `id`. This reads that stream to its end.
import { RegistryError, type PullProgress } from '../ports/images.js';
import { PullProgressCounter } from './pull-progress.js';

interface PullLine {
  stream?: string;
  error?: string;
  id?: string;
  images?: string[];
}

// What containers/image says when the registry answered but holds no such repository or tag.
const NOT_FOUND = /manifest unknown|name unknown|not found|does not exist|repository name not known/i;

export function isRegistryNotFound(message: string): boolean {
  return NOT_FOUND.test(message);
}

export async function readPullStream(body: AsyncIterable<Buffer | string>, onProgress?: (progress: PullProgress) => void): Promise<{ id: string }> {
  const counter = new PullProgressCounter();
  let buffered = '';
  let id: string | undefined;
  let error: string | undefined;
  const handle = (text: string) => {
    if (text.trim() === '') return;
    let line: PullLine;
    try {
      line = JSON.parse(text) as PullLine;
    } catch {
      return; // A line that is not JSON carries no result; Podman never sends one in practice.
    }
    if (line.error) error = line.error;
    if (line.id) id = line.id;
    for (const step of (line.stream ?? '').split('\n')) {
      if (step.trim() !== '') onProgress?.(counter.next(step));
    }
  };
  for await (const chunk of body) {
    buffered += typeof chunk === 'string' ? chunk : chunk.toString('utf8');
    let newline: number;
    while ((newline = buffered.indexOf('\n')) !== -1) {
      handle(buffered.slice(0, newline));
      buffered = buffered.slice(newline + 1);
    }
  }
  handle(buffered);
  if (error !== undefined) throw new RegistryError(error, isRegistryNotFound(error));
  if (id === undefined) throw new RegistryError('the pull ended without an image id', false);
  return { id };
}
