import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError } from '../../src/errors.js';
import { imageMatchesPatterns, normaliseImageReference, parseImageReference, validateImage } from '../../src/core/validation/images.js';
import { refused } from './support/refused.js';

const DIGEST = `sha256:${'a'.repeat(64)}`;

describe('image reference normalisation', () => {
  const cases: [string, string][] = [
    ['python', 'docker.io/library/python:latest'],
    ['python:3', 'docker.io/library/python:3'],
    ['python:3.12-slim', 'docker.io/library/python:3.12-slim'],
    ['library/python:3', 'docker.io/library/python:3'],
    ['docker.io/python:3', 'docker.io/library/python:3'],
    ['index.docker.io/library/python:3', 'docker.io/library/python:3'],
    ['myorg/tool', 'docker.io/myorg/tool:latest'],
    ['localhost/foo', 'localhost/foo:latest'],
    ['localhost/berth-agent:0.1.0-alpha', 'localhost/berth-agent:0.1.0-alpha'],
    ['localhost:5000/foo:1', 'localhost:5000/foo:1'],
    ['quay.io/org/team/tool:v1', 'quay.io/org/team/tool:v1'],
    ['registry.example.com:8443/a/b', 'registry.example.com:8443/a/b:latest'],
    ['[::1]:5000/foo:1', '[::1]:5000/foo:1'],
    [`python@${DIGEST}`, `docker.io/library/python@${DIGEST}`],
    [`python:3@${DIGEST}`, `docker.io/library/python:3@${DIGEST}`],
    ['my_image__x-y.z:T_a.g-1', 'docker.io/library/my_image__x-y.z:T_a.g-1'],
    ['localhost', 'docker.io/library/localhost:latest'],
  ];
  for (const [written, normalised] of cases) {
    it(`${written} → ${normalised}`, () => assert.equal(normaliseImageReference(written), normalised));
  }

  const invalid: [string, RegExp][] = [
    ['', /empty/],
    ['python 3', /whitespace/],
    ['python:3 ', /whitespace/],
    ['py\tthon', /whitespace/],
    ['Python:3', /must be lowercase/],
    ['myorg/Tool', /must be lowercase/],
    ['localhost/Foo', /must be lowercase/],
    ['-python', /starts with "-"/],
    ['python/-x', /not a valid repository name component/],
    ['a/../b', /contains "\.\."/],
    ['python:..', /contains "\.\."/],
    ['docker://python', /transport prefixes/],
    ['python:', /tag "" is not valid/],
    ['python:-x', /tag "-x" is not valid/],
    [`python:${'a'.repeat(129)}`, /tag .* is not valid/],
    ['python@sha256:abc', /is not a digest/],
    ['python@', /is not a digest/],
    ['python_:3', /not a valid repository name component/],
    ['a//b', /not a valid repository name component/],
    ['bad_host.com/x', /not a valid registry host/],
    ['-bad.com/x', /starts with "-"/],
    [`${'a'.repeat(256)}`, /1 to 255 characters/],
    ['x'.repeat(600), /longer than 512/],
    ['python:3$(id)', /tag .* is not valid/],
  ];
  for (const [written, pattern] of invalid) {
    it(`refuses ${JSON.stringify(written.length > 40 ? `${written.slice(0, 40)}…` : written)}`, () => {
      const parsed = parseImageReference(written);
      assert.ok('error' in parsed, `expected an error for ${written}`);
      assert.match(parsed.error, pattern);
    });
  }
});

describe('image patterns', () => {
  const cases: [string, string[], boolean][] = [
    ['python:3', ['python:*'], true],
    ['docker.io/library/python:3', ['python:*'], false],
    ['python:3', ['docker.io/library/python:*'], true],
    ['docker.io/library/python:3', ['docker.io/library/python:*'], true],
    ['python', ['python:*'], false],
    ['python', ['docker.io/library/python:*'], true],
    ['localhost/berth-agent:1', ['localhost/berth-*'], true],
    ['localhost/berth-agent', ['localhost/berth-*'], true],
    ['localhost/berth-x/evil:1', ['localhost/berth-*'], false],
    ['localhost/other:1', ['localhost/berth-*'], false],
    ['quay.io/org/a/b:1', ['quay.io/org/*'], false],
    ['quay.io/org/a/b:1', ['quay.io/org/**'], true],
    ['python.evil.example/python:3', ['python*'], false],
    ['evil.example/python:3', ['python:*'], false],
    ['python:3', ['python:?'], true],
    ['python:31', ['python:?'], false],
    ['pythonx:3', ['python:*'], false],
    ['python:3', ['node:*', 'python:3'], true],
    ['anything:1', [], true],
    ['python:3', ['python.3'], false],
    ['pythonX3', ['python+3'], false],
  ];
  for (const [image, patterns, expected] of cases) {
    it(`${image} ${expected ? 'matches' : 'does not match'} ${JSON.stringify(patterns)}`, () => {
      assert.equal(imageMatchesPatterns(image, normaliseImageReference(image) ?? image, patterns), expected);
    });
  }
});

describe('validateImage', () => {
  const policy = { allowedPatterns: ['python:*', 'localhost/berth-*'], defaultImage: 'localhost/berth-agent:0.1.0-alpha' };

  it('uses the default image when none is given', () => assert.equal(validateImage(undefined, policy), 'localhost/berth-agent:0.1.0-alpha'));
  it('returns the normalised reference', () => assert.equal(validateImage('python:3', policy), 'docker.io/library/python:3'));
  it('allows the default image even when no pattern matches it', () => {
    const strict = { ...policy, allowedPatterns: ['python:*'] };
    assert.equal(validateImage('localhost/berth-agent:0.1.0-alpha', strict), 'localhost/berth-agent:0.1.0-alpha');
  });
  it('allows everything valid when the pattern list is empty', () => {
    assert.equal(validateImage('quay.io/x/y:1', { ...policy, allowedPatterns: [] }), 'quay.io/x/y:1');
  });
  it('refuses an image no pattern matches, naming the variable', () => {
    assert.throws(() => validateImage('node:20', policy), (error: unknown) =>
      error instanceof BerthError && error.code === 'BERTH_ERR_IMAGE_NOT_ALLOWED' && error.status === 400
      && error.message === 'container.image "node:20" is not allowed: it matches no pattern of SERVICE_AGENT_ALLOWED_IMAGE_PATTERNS');
  });
  it('refuses an invalid reference even when the pattern list is empty', () => {
    assert.throws(() => validateImage('Python:3', { ...policy, allowedPatterns: [] }), refused(/^container\.image: "Python:3" is not a valid image reference: repository names must be lowercase$/));
  });
  it('refuses control characters', () => {
    assert.throws(() => validateImage('python:3\u0000', policy), (error: unknown) => error instanceof BerthError && /U\+0000/.test(error.message));
  });
});
