// The README's blocks that the users' path runs literally: each follows a marker comment in README.md.
import assert from 'node:assert/strict';

/** The marker of the quick-start block; the others add a name in parentheses, e.g. "(clients)". */
export const MARKER = '<!-- newcomer-test: runs this block verbatim -->';

/** The README's quick-start block (or the one after `marker`) that a user copies. */
export async function readmeCommands(readme: string, marker = MARKER): Promise<string> {
  const at = readme.indexOf(marker);
  assert.ok(at >= 0, `the README marks its quick-start commands with ${marker}`);
  const block = /```sh\n([\s\S]*?)```/.exec(readme.slice(at));
  assert.ok(block, 'a ```sh block follows the marker');
  return block[1]!;
}
