// From Berth's OpenAPI document to the two committed files of @berth/client: the document's snapshot
// (packages/client/openapi.json) and the types generated from it (src/generated/openapi.ts). Shared by
// scripts/generate.ts and by the test that fails when the committed files are stale, so both produce
// byte-identical text from the same document.
import openapiTS, { astToString, COMMENT_HEADER, type OpenAPI3 } from 'openapi-typescript';
import { join } from 'node:path';

export const PACKAGE_DIR = join(import.meta.dirname, '..');
export const SNAPSHOT_PATH = join(PACKAGE_DIR, 'openapi.json');
export const TYPES_PATH = join(PACKAGE_DIR, 'src', 'generated', 'openapi.ts');
export const REGENERATE_COMMAND = 'npm run generate -w @berth/client (with Berth running, authentication on: make up)';

/**
 * The snapshot as committed. The document's own key order is kept: Berth builds it from its route
 * schemas in registration order, so it is already stable, and it is the order a reader expects.
 */
export function snapshotText(document: unknown): string {
  return `${JSON.stringify(document, null, 2)}\n`;
}

/** The TypeScript declarations for a document (`paths`, `components`, `operations`). */
export async function typesText(document: unknown): Promise<string> {
  // A deep copy: openapi-typescript annotates the object it is given.
  const nodes = await openapiTS(structuredClone(document) as OpenAPI3, { silent: true });
  return `${COMMENT_HEADER}${astToString(nodes).trimEnd()}\n`;
}
