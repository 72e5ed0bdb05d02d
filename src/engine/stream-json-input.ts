// What Berth writes on an engine's stdin in `--input-format stream-json` mode: user turns and the
// initialize control request whose answer says the engine is ready for turns (a pre-started engine's
// warm-up: warm-up.ts).

/** The request id of Berth's initialize request; the engine echoes it in its control_response line. */
export const READY_REQUEST_ID = 'berth-ready';

/** Sent first on stdin: the engine answers with one control_response line when it is ready for turns. */
export const READY_REQUEST = JSON.stringify({ type: 'control_request', request_id: READY_REQUEST_ID, request: { subtype: 'initialize' } });

/** Whether a stdout line is the engine's answer to READY_REQUEST. */
export function isReadyAnswer(line: string): boolean {
  return line.includes(`"request_id":"${READY_REQUEST_ID}"`);
}

/** One turn as the engine's stream-json input expects it. */
export function turnLine(prompt: string): string {
  return JSON.stringify({ type: 'user', message: { role: 'user', content: prompt } });
}
