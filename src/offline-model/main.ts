// Standalone offline model: `tsx src/offline-model/main.ts`, configured by OFFLINE_MODEL_* variables.
// Point an engine at the printed URL to get deterministic runs without an API key or network.
import { startOfflineModel } from './server.js';

const host = process.env.OFFLINE_MODEL_HOST || '127.0.0.1';
const portText = process.env.OFFLINE_MODEL_PORT || '8787';
const apiKey = process.env.OFFLINE_MODEL_API_KEY || undefined;

if (!/^\d{1,5}$/.test(portText) || Number(portText) > 65_535) {
  console.error(`OFFLINE_MODEL_PORT must be a port number (0-65535), got "${portText}"`);
  process.exit(1);
}

const model = await startOfflineModel({
  host,
  port: Number(portText),
  ...(apiKey === undefined ? {} : { apiKey }),
  log: (msg) => console.log(msg),
});
console.log(`offline model listening on ${model.url}${apiKey === undefined ? '' : ' (API key required)'}`);

const stop = (signal: NodeJS.Signals): void => {
  console.log(`offline model stopping (${signal})`);
  model.close().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(`offline model did not close cleanly: ${String(error)}`);
      process.exit(1);
    },
  );
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
