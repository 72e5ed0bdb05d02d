// What Berth says about itself: health, version, engine credentials, usable secret names.

import { answer, type Api } from './api.js';
import type { CallOptions, ClaudeStatus, Health, SecretList, Version } from './types.js';

export class System {
  constructor(private readonly api: Api) {}

  async health(options: CallOptions = {}): Promise<Health> {
    return answer(await this.api.GET('/health', { signal: options.signal }));
  }

  async version(options: CallOptions = {}): Promise<Version> {
    return answer(await this.api.GET('/version', { signal: options.signal }));
  }

  async claudeStatus(options: CallOptions = {}): Promise<ClaudeStatus> {
    return answer(await this.api.GET('/claude/status', { signal: options.signal }));
  }

  async secrets(options: CallOptions = {}): Promise<SecretList> {
    return answer(await this.api.GET('/secrets', { signal: options.signal }));
  }
}
