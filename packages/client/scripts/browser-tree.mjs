// Makes dist/browser/, the SDK for browsers (the package's "browser" export condition): the compiled dist/
// with each module that has a `.browser` variant replaced by that variant (pack-directory, extract-archive:
// a web page has no local directory to walk or write), so that a bundler never meets node:fs, node:path or
// tar. Declarations are not copied: both trees share dist/*.d.ts (the variants keep their modules' exports).
import { cpSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';

const dist = new URL('../dist/', import.meta.url).pathname;
const browser = join(dist, 'browser');
rmSync(browser, { recursive: true, force: true });
mkdirSync(browser);
const modules = readdirSync(dist, { recursive: true, withFileTypes: true })
  .filter((entry) => entry.isFile() && entry.name.endsWith('.js'))
  .map((entry) => join(entry.parentPath, entry.name).slice(dist.length))
  .filter((path) => !path.startsWith('browser/'));
const variants = new Set(modules.filter((path) => path.endsWith('.browser.js')));
for (const path of modules) {
  if (variants.has(path)) continue;
  const variant = path.replace(/\.js$/, '.browser.js');
  mkdirSync(join(browser, path, '..'), { recursive: true });
  cpSync(join(dist, variants.has(variant) ? variant : path), join(browser, path));
}
