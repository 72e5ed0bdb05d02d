// Loads something from Berth for a page: aborted when the page goes away or its inputs change, and, for
// live pages, loaded again every `refreshMs` while the tab is visible and `keepRefreshing` says so.
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';

export interface Resource<T> {
  /** The last value loaded; kept while a refresh is under way or failed. */
  readonly value: T | undefined;
  /** The last load's failure; cleared by the next success. */
  readonly error: unknown;
  readonly loading: boolean;
  /** Loads again now. */
  reload(): void;
}

export interface ResourceOptions<T> {
  /** Load again this many milliseconds after each load ends. */
  readonly refreshMs?: number;
  /** Whether to keep refreshing after this value (e.g. until a job has finished). Default: always. */
  readonly keepRefreshing?: (value: T) => boolean;
}

export function useResource<T>(
  load: (signal: AbortSignal) => Promise<T>,
  inputs: readonly unknown[],
  options: ResourceOptions<T> = {},
): Resource<T> {
  const [state, setState] = useState<{ value?: T; error?: unknown; loading: boolean }>({ loading: true });
  const [generation, setGeneration] = useState(0);
  const latest = useRef({ load, options });
  latest.current = { load, options };

  useEffect(() => {
    const controller = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      setState((previous) => ({ ...previous, loading: true }));
      let again = latest.current.options.refreshMs !== undefined;
      try {
        const value = await latest.current.load(controller.signal);
        if (controller.signal.aborted) return;
        setState({ value, loading: false });
        again &&= latest.current.options.keepRefreshing?.(value) ?? true;
      } catch (error) {
        if (controller.signal.aborted) return;
        setState((previous) => ({ ...previous, error, loading: false }));
      }
      if (again) schedule();
    };
    const schedule = () => {
      timer = setTimeout(() => {
        // A hidden tab does not poll; it loads again as soon as it is shown.
        if (document.visibilityState === 'hidden') document.addEventListener('visibilitychange', run, { once: true, signal: controller.signal });
        else void run();
      }, latest.current.options.refreshMs);
    };
    void run();
    return () => {
      controller.abort();
      clearTimeout(timer);
    };
    // The caller's inputs decide when to start over; load and options are read fresh on every run.
  }, [...inputs, generation]);

  const reload = useCallback(() => setGeneration((n) => n + 1), []);
  return { value: state.value, error: state.error, loading: state.loading, reload };
}
