// Routing by the URL's path under /console (history API): each page has a real address that can be
// bookmarked, reloaded and opened in a new tab; Berth answers every such path with index.html.
import type { ComponentChildren, JSX } from 'preact';
import { createContext } from 'preact';
import { useContext, useEffect, useMemo, useState } from 'preact/hooks';

/** Where the console is served; every route below is relative to it. */
export const BASE = import.meta.env.BASE_URL.replace(/\/$/, '');

export interface Location {
  /** The path under BASE, always starting with '/': '/agents/agent-1'. */
  readonly path: string;
  readonly query: URLSearchParams;
}

function current(): Location {
  const path = window.location.pathname.startsWith(BASE) ? window.location.pathname.slice(BASE.length) : window.location.pathname;
  return { path: path === '' ? '/' : path, query: new URLSearchParams(window.location.search) };
}

const LocationContext = createContext<Location>(current());

/** Goes to a page of the console (`to` relative to BASE, e.g. '/jobs/job-1'). */
export function navigate(to: string, options: { replace?: boolean } = {}): void {
  const url = `${BASE}${to}`;
  if (options.replace) window.history.replaceState(null, '', url);
  else window.history.pushState(null, '', url);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

export function LocationProvider({ children }: { children: ComponentChildren }) {
  const [location, setLocation] = useState(current);
  useEffect(() => {
    const changed = () => setLocation(current());
    window.addEventListener('popstate', changed);
    return () => window.removeEventListener('popstate', changed);
  }, []);
  return <LocationContext.Provider value={location}>{children}</LocationContext.Provider>;
}

export function useLocation(): Location {
  return useContext(LocationContext);
}

export interface Route {
  /** A pattern such as '/agents/:id'; parameters match one path segment. */
  readonly pattern: string;
  readonly render: (params: Record<string, string>) => JSX.Element;
}

/** The parameters of `path` when it matches `pattern`, decoded; undefined otherwise. */
export function match(pattern: string, path: string): Record<string, string> | undefined {
  const names: string[] = [];
  const source = pattern.replace(/[.*+?^${}()|[\]\\]/g, '\\$&').replace(/:(\w+)/g, (_, name: string) => {
    names.push(name);
    return '([^/]+)';
  });
  const found = new RegExp(`^${source}/?$`).exec(path);
  if (!found) return undefined;
  try {
    return Object.fromEntries(names.map((name, i) => [name, decodeURIComponent(found[i + 1]!)]));
  } catch {
    return undefined; // a malformed %-escape names no page
  }
}

export function Router({ routes, fallback }: { routes: readonly Route[]; fallback: () => JSX.Element | null }) {
  const { path } = useLocation();
  return useMemo(() => {
    for (const route of routes) {
      const params = match(route.pattern, path);
      if (params) return route.render(params);
    }
    return fallback();
  }, [routes, path, fallback]);
}

type AnchorProps = Omit<JSX.HTMLAttributes<HTMLAnchorElement>, 'href'> & { href: string };

/** A link to a page of the console: a real <a href> (new tab, copy link work) that navigates in place on a plain click. */
export function Link({ href, children, ...rest }: AnchorProps) {
  const onClick = (event: MouseEvent) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(href);
  };
  return (
    <a {...rest} href={`${BASE}${href}`} onClick={onClick}>
      {children}
    </a>
  );
}

/** A link of the main navigation, marked as the current page while its section is shown. */
export function NavLink({ href, children }: { href: string; children: ComponentChildren }) {
  const { path } = useLocation();
  const here = path === href || (href !== '/' && path.startsWith(`${href}/`));
  return (
    <Link href={href} aria-current={here ? 'page' : undefined}>
      {children}
    </Link>
  );
}
