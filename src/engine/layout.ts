// Where things live inside an agent container. The engine path is fixed by the interface.
export const ENGINE_MOUNT = '/opt/claude';
export const ENGINE_BINARY = `${ENGINE_MOUNT}/claude`;
/** The session's engine config directory (CLAUDE_CONFIG_DIR) is mounted here. */
export const ENGINE_CONFIG_DIR = '/var/lib/berth/engine';
/** Podman secrets for environment variables are mounted as files here, one per variable. */
export const SECRET_ENV_DIR = '/run/berth/env';
/**
 * The run's input files (prompt, system prompts, hooks) are bind-mounted read-only here from a host
 * directory of their own: no caller text passes through argv or a shell, and no copy into the container's
 * filesystem is needed (Podman's archive upload costs ~130 ms a run). /run/berth is blocked for volumes.
 */
export const INPUT_DIR = '/run/berth/input';
export const PROMPT_FILE = `${INPUT_DIR}/prompt`;
