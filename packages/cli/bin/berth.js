#!/usr/bin/env node
// The berth command. Its sources are TypeScript, run through tsx as Berth itself is; the user's own
// tsconfig (of whatever directory berth is started in) is deliberately not consulted.
import { register } from 'tsx/esm/api';

register({ tsconfig: false });
const { main } = await import('../src/main.ts');
await main(process.argv);
