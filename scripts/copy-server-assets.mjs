// Part of `npm run build`: copies what the compiled server reads beside its modules (the stores' SQL
// migrations, found through import.meta.url) from src/ to dist/, keeping their paths.
import { cpSync } from 'node:fs';

const root = new URL('..', import.meta.url).pathname;
cpSync(`${root}src`, `${root}dist`, {
  recursive: true,
  filter: (source, _target) => !/\.(ts|tsx)$/.test(source),
});
