// The typed HTTP client the resource modules share: openapi-fetch over the generated `paths`, sending
// through the Transport (tokens, rate limit, retries, errors). Because the Transport only ever hands back
// 2xx responses, a call's `data` is its answer; `answer()` states that once.

import type { Client } from 'openapi-fetch';
import { BerthError } from './errors.js';
import type { paths } from './generated/openapi.js';

export type Api = Client<paths>;

/** The body of a successful call; a 2xx answer without the JSON body its route promises is an error. */
export function answer<T>(result: { data?: T; response: Response }): T {
  if (result.data === undefined) {
    throw new BerthError(result.response.status, `${result.response.url} answered ${result.response.status} without a body`);
  }
  return result.data;
}
