// A job's or an agent's status as a word with a colour; the word carries the meaning, the colour only helps.

const TONES: Record<string, string> = {
  completed: 'good',
  idle: 'good',
  ok: 'good',
  configured: 'good',
  running: 'busy',
  generating: 'busy',
  starting: 'busy',
  pending: 'waiting',
  failed: 'bad',
  crashed: 'bad',
  unavailable: 'bad',
  degraded: 'bad',
  cancelled: 'muted',
  exited: 'muted',
  not_configured: 'muted',
};

export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge badge-${TONES[status] ?? 'muted'}`}>{status.replace(/_/g, ' ')}</span>;
}
