import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BerthError } from '../../src/errors.js';
import { blockedVariableReason, checkSecretsEnv, isUsableSecret, secretsPolicy, validateSecretsEnv } from '../../src/core/validation/secrets-env.js';
import { refused } from './support/refused.js';

const policy = { reservedSecrets: ['engine-credentials'] };

describe('secrets_env variable names', () => {
  const allowed = ['GITHUB_TOKEN', 'github_token', '_PRIVATE', 'a', 'A1', 'NPM_TOKEN', 'OPENAI_API_KEY', 'TMPDIR', 'TZ', 'LANG', 'LDAP_PASSWORD',
    'NODE_ENV', 'PATHS', 'HOMEBREW_TOKEN', 'MY_ANTHROPIC_KEY', 'XDG_CONFIG_HOME'];
  for (const variable of allowed) {
    it(`allows ${variable}`, () => assert.deepEqual(checkSecretsEnv({ [variable]: 'my-secret' }, policy), [{ variable, secret: 'my-secret' }]));
  }

  const invalid = ['', '1ABC', 'A-B', 'A.B', 'A B', 'A=B', 'É', 'A\u0000', 'A\n', '$A'];
  for (const variable of invalid) {
    it(`refuses the name ${JSON.stringify(variable)}`, () => {
      assert.throws(() => checkSecretsEnv({ [variable]: 's' }, policy), refused(/^container\.secrets_env: .* is not a valid variable name/));
    });
  }

  const blocked = ['LD_PRELOAD', 'LD_LIBRARY_PATH', 'LD_AUDIT', 'LD_DEBUG', 'LD_DEBUG_OUTPUT', 'LD_BIND_NOW', 'LD_ANYTHING', 'ld_preload',
    'GCONV_PATH', 'GLIBC_TUNABLES', 'LOCPATH', 'HOSTALIASES', 'RES_OPTIONS', 'NLSPATH', 'MALLOC_TRACE',
    'NODE_OPTIONS', 'NODE_PATH', 'NODE_EXTRA_CA_CERTS', 'NODE_TLS_REJECT_UNAUTHORIZED', 'SSL_CERT_FILE', 'SSL_CERT_DIR', 'BUN_OPTIONS',
    'BASH_ENV', 'ENV', 'SHELLOPTS', 'BASHOPTS', 'PROMPT_COMMAND', 'PS4', 'IFS', 'PATH', 'SHELL', 'BASH_FUNC_ls',
    'HTTP_PROXY', 'https_proxy', 'ALL_PROXY', 'NO_PROXY',
    'ANTHROPIC_BASE_URL', 'ANTHROPIC_API_KEY', 'ANTHROPIC_AUTH_TOKEN', 'ANTHROPIC_CUSTOM_HEADERS', 'CLAUDE_CODE_OAUTH_TOKEN',
    'CLAUDE_CONFIG_DIR', 'CLAUDE_CODE_USE_BEDROCK', 'HOME', 'home', 'BERTH_RUN_ID'];
  for (const variable of blocked) {
    it(`refuses the blocked variable ${variable}`, () => {
      assert.throws(() => checkSecretsEnv({ [variable]: 's' }, policy),
        refused(new RegExp(`^container\\.secrets_env\\.${variable}: the variable ${variable} is blocked: `)));
    });
  }
  it('explains why a variable is blocked', () => {
    assert.equal(blockedVariableReason('LD_PRELOAD'), 'it changes how the dynamic loader loads code');
    assert.equal(blockedVariableReason('ANTHROPIC_BASE_URL'), 'Berth sets it for the engine');
    assert.equal(blockedVariableReason('GITHUB_TOKEN'), undefined);
  });
});

describe('secrets_env secret names and count', () => {
  const allowed = ['a', 'my-secret', 'My.Secret_1', '0abc', 'x'.repeat(253)];
  for (const secret of allowed) {
    it(`allows the secret name ${secret.length > 20 ? `${secret.slice(0, 20)}…` : secret}`, () => {
      assert.deepEqual(checkSecretsEnv({ TOKEN: secret }, policy), [{ variable: 'TOKEN', secret }]);
    });
  }
  const invalid = ['', '-x', '.x', '_x', 'a b', 'a/b', 'a:b', 'a$b', 'x'.repeat(254), 'é'];
  for (const secret of invalid) {
    it(`refuses the secret name ${JSON.stringify(secret.length > 20 ? `${secret.slice(0, 20)}…` : secret)}`, () => {
      assert.throws(() => checkSecretsEnv({ TOKEN: secret }, policy), refused(/^container\.secrets_env\.TOKEN: .* is not a valid secret name/));
    });
  }
  for (const secret of ['engine-credentials', 'berth-engine-credentials', 'BERTH-x', 'berth-anything']) {
    it(`refuses the reserved secret ${secret}`, () => {
      assert.throws(() => checkSecretsEnv({ TOKEN: secret }, policy), refused(/^container\.secrets_env\.TOKEN: secret ".*" is reserved for Berth's own use$/));
    });
  }
  it('allows 50 entries', () => {
    const fifty = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`V${i}`, `s${i}`]));
    assert.equal(checkSecretsEnv(fifty, policy).length, 50);
  });
  it('refuses 51 entries', () => {
    const many = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`V${i}`, `s${i}`]));
    assert.throws(() => checkSecretsEnv(many, policy), refused(/^container\.secrets_env: has 51 entries; at most 50 are allowed$/));
  });
  it('returns nothing for no secrets_env', () => assert.deepEqual(checkSecretsEnv(undefined, policy), []));
});

describe('secrets_env existence', () => {
  const store = new Set(['gh-token', 'npm-token']);
  const exists = async (name: string) => store.has(name);

  it('accepts secrets that exist', async () => {
    assert.deepEqual(await validateSecretsEnv({ GH: 'gh-token', NPM: 'npm-token' }, policy, exists), [
      { variable: 'GH', secret: 'gh-token' },
      { variable: 'NPM', secret: 'npm-token' },
    ]);
  });
  it('refuses a missing secret, naming the variable and the secret', async () => {
    await assert.rejects(validateSecretsEnv({ GH: 'gh-token', X: 'nope' }, policy, exists), (error: unknown) =>
      error instanceof BerthError && error.code === 'BERTH_ERR_SECRET_NOT_FOUND' && error.status === 400
      && error.message === 'container.secrets_env.X: secret "nope" does not exist in the Podman secret store');
  });
  it('never asks the store about a refused name', async () => {
    const asked: string[] = [];
    await assert.rejects(validateSecretsEnv({ LD_PRELOAD: 'gh-token' }, policy, async (name) => (asked.push(name), true)));
    assert.deepEqual(asked, []);
  });
});

describe('secrets a caller may use (the rule GET /secrets lists by)', () => {
  const names = ['gh-token', 'engine-credentials', 'berth-offline-model-key-test-1a2b-c3d4', 'BERTH-x', 'berth-engine-credentials', 'npm.token', '_x'];

  it('reserves the configured engine credential besides the berth- namespace', () => {
    assert.deepEqual(secretsPolicy({ credentialsSecret: 'engine-credentials' }), policy);
  });
  it('is exactly what secrets_env accepts', () => {
    for (const name of names) {
      const accepted = (() => {
        try {
          checkSecretsEnv({ TOKEN: name }, policy);
          return true;
        } catch {
          return false;
        }
      })();
      assert.equal(isUsableSecret(name, policy), accepted, name);
    }
    assert.deepEqual(names.filter((name) => isUsableSecret(name, policy)), ['gh-token', 'npm.token']);
  });
});
