// The workspace index as the service uses it: a write SQLite cannot make because the data directory's disk is
// full becomes the 503 every store of Berth answers then (BERTH_ERR_STORAGE_FULL: retry once space is freed),
// not a 500. A run creating its session's own workspace on a full disk met exactly that 500.
import { errors } from '../../errors.js';
import { isStorageFull } from '../../store/sqlite.js';
import type { WorkspaceStore } from '../../store/workspaces/workspace-store.js';

export function translatingFullDisk(store: WorkspaceStore): WorkspaceStore {
  return new Proxy(store, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (typeof value !== 'function') return value;
      return (...args: unknown[]) => {
        const translate = (error: unknown): never => {
          throw isStorageFull(error) ? errors.storageFull('workspace index') : error;
        };
        try {
          const result = (value as (...a: unknown[]) => unknown).apply(target, args);
          return result instanceof Promise ? result.catch(translate) : result;
        } catch (error) {
          return translate(error);
        }
      };
    },
  });
}
