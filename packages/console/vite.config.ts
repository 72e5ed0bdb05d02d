// The console is built into dist/ and served by Berth at /console (src/http/routes/console.ts).
// `npm run dev -w @berth/console` serves it with hot reload and forwards API calls to BERTH_URL.
import { defineConfig } from 'vite';
import preact from '@preact/preset-vite';

const API_PREFIXES = ['/auth', '/run', '/jobs', '/agents', '/sessions', '/workspaces', '/images', '/health', '/version', '/claude', '/secrets', '/swagger'];
const berthUrl = process.env.BERTH_URL ?? 'http://127.0.0.1:8080';

export default defineConfig({
  base: '/console/',
  plugins: [preact()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    // One script, no inline polyfill: the page's CSP allows scripts from Berth's origin only.
    modulePreload: { polyfill: false },
  },
  server: {
    proxy: Object.fromEntries(API_PREFIXES.map((prefix) => [prefix, { target: berthUrl, changeOrigin: true }])),
  },
});
