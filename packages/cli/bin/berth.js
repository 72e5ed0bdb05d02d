#!/usr/bin/env node
// The berth command. Installed from its package it runs the compiled dist/ with plain Node. In Berth's
// repository, where src/ sits beside this file (the package's files leave src/ out), it runs the sources
// through tsx instead, so that a checkout needs no build step and never runs a stale build. tsx is then given
// this package's tsconfig.json (which maps @berth/client and @berth/mcp to their sources), never the one of
// the directory berth is started in.
import { existsSync } from 'node:fs';

const sources = new URL('../src/main.ts', import.meta.url);
let main;
if (existsSync(sources)) {
  const { register } = await import('tsx/esm/api');
  register({ tsconfig: new URL('../tsconfig.json', import.meta.url).pathname });
  ({ main } = await import(sources.href));
} else {
  ({ main } = await import('../dist/main.js'));
}
await main(process.argv);
