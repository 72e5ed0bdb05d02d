// Regenerates @berth/client's OpenAPI snapshot and types from a running Berth:
//   npm run generate -w @berth/client [-- <url of /swagger/doc.json>]
// The URL defaults to the Berth `make up` starts. GET /swagger/doc.json needs no token. The document's
// top-level `security` follows the server's SERVICE_AUTH_ENABLED; the snapshot is taken with
// authentication on, as `make up` runs Berth (the types do not depend on it).
import { mkdir, writeFile } from 'node:fs/promises';
import { dirname, relative } from 'node:path';
import { SNAPSHOT_PATH, TYPES_PATH, snapshotText, typesText } from './openapi-types.js';

const DEFAULT_URL = 'http://127.0.0.1:8080/swagger/doc.json';

async function fetchDocument(url: string): Promise<unknown> {
  let response: Response;
  try {
    response = await fetch(url);
  } catch (error) {
    const cause = (error as Error & { cause?: { code?: string; message?: string } }).cause;
    const reason = cause?.code ?? cause?.message ?? (error as Error).message;
    throw new Error(`cannot reach ${url} (${reason}); start Berth with \`make up\`, or pass the URL of its /swagger/doc.json`);
  }
  if (!response.ok) throw new Error(`GET ${url} answered ${response.status}`);
  return response.json();
}

const url = process.argv[2] ?? DEFAULT_URL;
try {
  const document = await fetchDocument(url);
  await mkdir(dirname(TYPES_PATH), { recursive: true });
  await writeFile(SNAPSHOT_PATH, snapshotText(document));
  await writeFile(TYPES_PATH, await typesText(document));
  for (const path of [SNAPSHOT_PATH, TYPES_PATH]) console.log(`wrote ${relative(process.cwd(), path)}`);
} catch (error) {
  console.error(`generate: ${(error as Error).message}`);
  process.exitCode = 1;
}
