// Turns every failure into Berth's error body {"error": "...", "status": "error"}: BerthErrors with
// their catalogue status, Fastify's own errors (schema validation, body too large, bad JSON) as clear
// 4xx texts, and anything unexpected as a logged 500 that reveals no internals.
import type { FastifyError, FastifyInstance, FastifyReply } from 'fastify';
import type { Static } from '@sinclair/typebox';
import { BerthError, errors } from '../errors.js';
import type { ErrorBodySchema } from './schemas.js';

type ErrorBody = Static<typeof ErrorBodySchema>;

export function sendError(reply: FastifyReply, error: BerthError): FastifyReply {
  const body: ErrorBody = { error: error.message, status: 'error' };
  return reply.code(error.status).type('application/json').send(body);
}

interface AjvLikeError {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** `body/engine/max_turns` → `engine.max_turns`; the wire location is implied by the route. */
function fieldName(context: string | undefined, instancePath: string): string {
  const path = instancePath.replace(/^\//, '').replace(/\//g, '.');
  if (path !== '') return path;
  return context === 'body' ? 'request body' : (context ?? 'request');
}

export function describeValidationError(context: string | undefined, error: AjvLikeError): string {
  const field = fieldName(context, error.instancePath);
  const params = error.params;
  switch (error.keyword) {
    case 'additionalProperties':
      return `${field === 'request body' ? '' : `${field}: `}unknown field "${String(params.additionalProperty)}"`;
    case 'required':
      return `${field === 'request body' || field === 'querystring' ? '' : `${field}.`}${String(params.missingProperty)} is required`;
    case 'type':
      return `${field} must be of type ${String(params.type)}`;
    case 'anyOf':
    case 'const':
    case 'enum':
      return `${field} has a value that is not allowed`;
    default:
      return `${field} ${error.message ?? 'is invalid'}`;
  }
}

export function translateFastifyError(error: FastifyError): BerthError | undefined {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE') {
    return errors.tooLarge('request body is too large (SERVICE_MAX_BODY_BYTES)');
  }
  if (error.code === 'FST_ERR_CTP_INVALID_JSON_BODY' || error.name === 'SyntaxError') {
    return errors.badRequest('request body is not valid JSON');
  }
  if (error.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
    return errors.badRequest('unsupported Content-Type; send application/json');
  }
  if (error.code === 'FST_ERR_CTP_EMPTY_JSON_BODY') {
    return errors.badRequest('request body is empty; send a JSON object');
  }
  if (error.validation) {
    return errors.badRequest(error.message);
  }
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    return errors.badRequest(error.message);
  }
  return undefined;
}

export function registerErrorHandler(app: FastifyInstance): void {
  app.setSchemaErrorFormatter((validationErrors, context) => {
    const first = validationErrors[0] as AjvLikeError | undefined;
    const message = first ? describeValidationError(context, first) : `invalid ${context}`;
    return new Error(message);
  });

  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (error instanceof BerthError) return sendError(reply, error);
    const translated = translateFastifyError(error);
    if (translated) return sendError(reply, translated);
    request.log.error({ err: error }, 'unexpected error');
    return sendError(reply, errors.internal('internal error; see the service log for details'));
  });

  app.setNotFoundHandler((request, reply) => sendError(reply, errors.routeNotFound(request.method, request.url.split('?')[0]!)));
}
