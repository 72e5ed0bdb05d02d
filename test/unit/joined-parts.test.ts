// The Podman runtime is one object joined from one part per concern (runtime/podman/joined-parts.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { joinParts } from '../../src/runtime/podman/joined-parts.js';

class Counter {
  #count = 0;
  increment(): number {
    return this.#bumped();
  }
  #bumped(): number {
    return ++this.#count;
  }
}

class Greeter {
  constructor(private readonly name: string) {}
  greet(): string {
    return `hello ${this.name}`;
  }
}

class LoudGreeter extends Greeter {
  override greet(): string {
    return super.greet().toUpperCase();
  }
  shout(): string {
    return this.greet() + '!';
  }
}

test("every part's public methods are on the joined object, each still working on its own part", () => {
  const joined = joinParts(new Counter(), new Greeter('berth'));
  assert.deepEqual(Object.keys(joined).sort(), ['greet', 'increment']);
  // Called unbound, as callers that take a method off the runtime do.
  const { increment, greet } = joined;
  increment();
  assert.equal(increment(), 2);
  assert.equal(greet(), 'hello berth');
});

test('a method of a base class is joined too, and the subclass override wins', () => {
  const joined = joinParts(new LoudGreeter('pool'));
  assert.deepEqual(Object.keys(joined).sort(), ['greet', 'shout']);
  assert.equal(joined.greet(), 'HELLO POOL');
  assert.equal(joined.shout(), 'HELLO POOL!');
});

test('a method replaced on the joined object is the one callers get from then on', () => {
  const joined = joinParts(new Counter());
  const original = joined.increment.bind(joined);
  joined.increment = () => original() * 10;
  assert.equal(joined.increment(), 10);
});

test('two parts defining the same method are refused, not one silently hiding the other', () => {
  assert.throws(() => joinParts(new Greeter('a'), new LoudGreeter('b')), /two parts define greet/);
});
