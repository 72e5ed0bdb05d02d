// A TypeDoc plugin for the generated types: openapi-typescript writes each field's OpenAPI description as
// a `@description` block, which TypeDoc would print under a "Description" heading. This makes it the
// field's summary, as a hand-written doc comment would be.
import { Converter } from 'typedoc';

/** @param {import('typedoc').Application} app */
export function load(app) {
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context) => {
    for (const reflection of Object.values(context.project.reflections)) {
      for (const comment of [reflection.comment, ...(reflection.signatures ?? []).map((s) => s.comment)]) {
        const description = comment?.getTag('@description');
        if (!comment || !description) continue;
        comment.summary = [...comment.summary, ...(comment.summary.length > 0 ? [{ kind: 'text', text: '\n\n' }] : []), ...description.content];
        comment.removeTags('@description');
      }
    }
  });
}
