// Estimated cost of a session's tokens, per model family, in USD per million tokens.
// Source: Anthropic's public pricing page (anthropic.com/pricing), list prices as of 2025-11.
// Cache writes are priced at the 5-minute rate (1.25 × input); cache reads at 0.1 × input.
import type { TokenUsage } from './stream-json.js';

interface Price {
  readonly input: number;
  readonly output: number;
  readonly cacheWrite: number;
  readonly cacheRead: number;
}

const PRICES: readonly { readonly match: RegExp; readonly price: Price }[] = [
  { match: /opus-4-[5-9]|opus-[5-9]/, price: { input: 5, output: 25, cacheWrite: 6.25, cacheRead: 0.5 } },
  { match: /opus/, price: { input: 15, output: 75, cacheWrite: 18.75, cacheRead: 1.5 } },
  { match: /haiku-4|haiku-[5-9]/, price: { input: 1, output: 5, cacheWrite: 1.25, cacheRead: 0.1 } },
  { match: /haiku/, price: { input: 0.8, output: 4, cacheWrite: 1, cacheRead: 0.08 } },
  { match: /sonnet/, price: { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 } },
];

/** Models the table does not know (including the offline model's echo of a name) are priced as Sonnet. */
const DEFAULT_PRICE: Price = { input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3 };

export function priceOf(model: string | undefined): Price {
  const name = (model ?? '').toLowerCase();
  return PRICES.find((entry) => entry.match.test(name))?.price ?? DEFAULT_PRICE;
}

export function estimateCostUsd(usage: TokenUsage, model: string | undefined): number {
  const price = priceOf(model);
  const cost =
    usage.input_tokens * price.input +
    usage.output_tokens * price.output +
    usage.cache_creation_input_tokens * price.cacheWrite +
    usage.cache_read_input_tokens * price.cacheRead;
  return Math.round((cost / 1_000_000) * 1e6) / 1e6;
}
