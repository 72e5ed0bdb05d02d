// Previous / next buttons for a list shown `pageSize` items at a time.

export interface PagerProps {
  readonly offset: number;
  readonly pageSize: number;
  /** Items on this page. */
  readonly count: number;
  /** Whether items follow; by default, when this page is full. */
  readonly hasMore?: boolean;
  readonly onOffset: (offset: number) => void;
  /** Names the navigation landmark, e.g. "Jobs pages". */
  readonly label: string;
}

export function Pager({ offset, pageSize, count, hasMore = count >= pageSize, onOffset, label }: PagerProps) {
  if (offset === 0 && !hasMore) return null;
  return (
    <nav class="pager" aria-label={label}>
      <button type="button" disabled={offset === 0} onClick={() => onOffset(Math.max(0, offset - pageSize))}>
        Previous
      </button>
      <span>{count === 0 ? 'none' : `${offset + 1}–${offset + count}`}</span>
      <button type="button" disabled={!hasMore} onClick={() => onOffset(offset + pageSize)}>
        Next
      </button>
    </nav>
  );
}
