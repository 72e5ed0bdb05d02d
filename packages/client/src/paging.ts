// Offset paging as async iteration: fetch a page, yield its items, ask for the next until the server
// says there is no more. Pages are fetched lazily, one at a time, as the caller consumes items.

export interface Page<T> {
  readonly items: readonly T[];
  /** Whether items follow this page. */
  readonly hasMore: boolean;
}

/** Yields every item of `fetchPage(offset)` pages, starting at `offset`, until a page has no more after it. */
export async function* pages<T>(fetchPage: (offset: number) => Promise<Page<T>>, offset = 0): AsyncGenerator<T, void, undefined> {
  for (;;) {
    const page = await fetchPage(offset);
    yield* page.items;
    if (!page.hasMore || page.items.length === 0) return;
    offset += page.items.length;
  }
}
