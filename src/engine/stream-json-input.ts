// What Berth writes on an engine's stdin in `--input-format stream-json` mode: user turns, the
// initialize control request whose answer says the engine is ready for turns, and the warm-up request of
// a pre-started engine.

/** The request id of Berth's initialize request; the engine echoes it in its control_response line. */
export const READY_REQUEST_ID = 'berth-ready';

/** Sent first on stdin: the engine answers with one control_response line when it is ready for turns. */
export const READY_REQUEST = JSON.stringify({ type: 'control_request', request_id: READY_REQUEST_ID, request: { subtype: 'initialize' } });

/** Whether a stdout line is the engine's answer to READY_REQUEST. */
export function isReadyAnswer(line: string): boolean {
  return line.includes(`"request_id":"${READY_REQUEST_ID}"`);
}

/** The request id of Berth's warm-up request. */
export const WARM_REQUEST_ID = 'berth-warm';

/**
 * Sent after READY_REQUEST to an engine that waits in the pool. An engine's first turn runs much of its code
 * for the first time (the system prompt, the tools' definitions), about 40 ms of CPU on a 2-core host that
 * later turns do not pay. Asking for a summary of the context usage runs that code while the engine waits:
 * the summary is computed locally (no request to the model, nothing written to the transcript), and the
 * first turn then starts warm.
 */
export const WARM_REQUEST = JSON.stringify({ type: 'control_request', request_id: WARM_REQUEST_ID, request: { subtype: 'get_context_usage', detail: 'summary' } });

/** Whether a stdout line is the engine's answer to WARM_REQUEST (success or error alike). */
export function isWarmAnswer(line: string): boolean {
  return line.includes(`"request_id":"${WARM_REQUEST_ID}"`);
}

/** One turn as the engine's stream-json input expects it. */
export function turnLine(prompt: string): string {
  return JSON.stringify({ type: 'user', message: { role: 'user', content: prompt } });
}
