// berth images ls|show|search|pull: the images runs can use, with their compatibility ranks.
import { Command } from 'commander';
import type { Image } from '@berth/client';
import { parseCount, type ContextOf } from '../context.js';
import { Interrupted } from '../errors.js';
import { onInterrupt } from '../interrupt.js';
import { humanBytes } from '../output.js';
import { PullBar } from '../pull-bar.js';

const RANKS: Record<number, string> = { 1: 'official', 2: 'verified', 3: 'glibc', 4: 'incompatible' };

export function imagesCommand(contextOf: ContextOf): Command {
  const images = new Command('images').summary('list, inspect, search and pull images').description('Images: which local images can run the engine (compatibility ranks), registry search and pulls.');

  images
    .command('ls')
    .description('list local images, best compatibility rank first')
    .action(async (_options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const list = await berth.images.list();
      output.list(list, list.images, [
        { header: 'IMAGE', value: reference },
        { header: 'ID', value: (image) => image.id.slice(0, 12) },
        { header: 'SIZE', value: (image) => humanBytes(image.size) },
        { header: 'RANK', value: rank },
        { header: 'ALLOWED', value: (image) => (image.allowed ? 'yes' : 'no') },
      ], 'no images');
    });

  images
    .command('show')
    .description('show one local image: rank, tools, whether runs may use it')
    .argument('<name>', 'image reference, e.g. localhost/berth-agent:0.1.0-alpha')
    .action(async (name: string, _options: unknown, command: Command) => {
      const { berth, output } = contextOf(command);
      const image = await berth.images.get(name);
      output.record(image, [
        ['image', reference(image)],
        ['id', image.id],
        ['size', humanBytes(image.size)],
        ['rank', rank(image)],
        ['compatible', image.compatible ? 'yes' : 'no (the engine needs glibc)'],
        ['allowed', image.allowed ? 'yes' : 'no (not in SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS)'],
        ['tools', image.tools.join(' ')],
      ]);
    });

  images
    .command('search')
    .description('search registries (a term, or host:port/term for one registry)')
    .argument('<term>', 'what to look for')
    .option('--limit <n>', 'results, at most 100 (default 25)', parseCount)
    .action(async (term: string, options: { limit?: number }, command: Command) => {
      const { berth, output } = contextOf(command);
      const found = await berth.images.search(term, options.limit !== undefined ? { limit: options.limit } : undefined);
      output.list(found, found.results, [
        { header: 'NAME', value: (result) => result.name },
        { header: 'STARS', value: (result) => String(result.stars) },
        { header: 'OFFICIAL', value: (result) => (result.official ? 'yes' : '') },
        { header: 'DESCRIPTION', value: (result) => truncate(result.description, 60) },
      ], 'nothing found');
    });

  images
    .command('pull')
    .description("pull an image the server allows, showing Podman's progress and a count of blobs")
    .argument('<image>', 'reference, e.g. docker.io/library/python:3.12-slim')
    .option('--platform <os/arch>', "platform to pull, e.g. linux/arm64 (default the server's)")
    .action(async (image: string, options: { platform?: string }, command: Command) => {
      const { berth, output } = contextOf(command);
      const interrupt = onInterrupt();
      const bar = new PullBar(image);
      let pulled;
      try {
        pulled = await berth.images.pull(image, {
          signal: interrupt.signal,
          onProgress: (progress) => {
            if (progress.phase === 'progress') bar.progress(progress);
          },
          ...(options.platform ? { platform: options.platform } : {}),
        });
        bar.done();
      } catch (error) {
        bar.abandon();
        throw interrupt.signal.aborted ? new Interrupted('stopped waiting for the pull') : error;
      } finally {
        interrupt.dispose();
      }
      output.record(pulled, [['pulled', pulled.image], ['id', pulled.image_id]]);
    });

  return images;
}

function reference(image: Image): string {
  return image.tag ? `${image.repository}:${image.tag}` : image.repository;
}

function rank(image: Image): string {
  return `${image.compatibility_rank} ${RANKS[image.compatibility_rank] ?? ''}`.trim();
}

function truncate(text: string, length: number): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length <= length ? line : `${line.slice(0, length - 1)}…`;
}
