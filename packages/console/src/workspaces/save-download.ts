// Saving what a workspace download answers as a file on the reader's computer. The API needs the tab's
// access token, which a plain <a href> to Berth would not send, so the page reads the response stream
// into a Blob and hands the browser an object URL to save: the bytes never leave the tab for anywhere but
// the reader's disk (the CSP keeps every request on Berth's origin).

/** Reads `stream` into a Blob and asks the browser to save it as `name`. */
export async function saveStream(stream: ReadableStream<Uint8Array>, name: string, type = 'application/octet-stream'): Promise<void> {
  const blob = await new Response(stream).blob();
  const url = URL.createObjectURL(new Blob([blob], { type }));
  try {
    const anchor = document.createElement('a');
    anchor.href = url;
    anchor.download = name;
    anchor.rel = 'noopener';
    document.body.append(anchor);
    anchor.click();
    anchor.remove();
  } finally {
    // The click has handed the URL to the download; revoking it later frees the Blob.
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }
}

/** The last segment of a workspace path ('' → the fallback). */
export function baseName(path: string, fallback: string): string {
  const segments = path.split('/').filter((segment) => segment !== '');
  return segments[segments.length - 1] ?? fallback;
}
