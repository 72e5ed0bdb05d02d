// Every page: its title in the tab and as the one <h1>, which takes the focus when the page is opened so
// that keyboard and screen-reader users start reading at the new page, not at the old link.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef } from 'preact/hooks';

export function Page({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  const heading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    document.title = `${title} · Berth console`;
  }, [title]);
  useEffect(() => {
    heading.current?.focus({ preventScroll: true });
  }, []);
  return (
    <>
      <div class="page-head">
        <h1 ref={heading} tabIndex={-1}>
          {title}
        </h1>
        {actions && <div class="page-actions">{actions}</div>}
      </div>
      {children}
    </>
  );
}
