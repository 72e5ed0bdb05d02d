// The caller of a request, from its verified access token (plugins/auth.ts); one caller when
// authentication is off.
import type { FastifyRequest } from 'fastify';
import { callerOf, type Caller } from '../core/auth/caller.js';

export function requestCaller(request: FastifyRequest): Caller {
  return callerOf(request.auth?.sub);
}
