// Where things live inside an agent container. The engine path is fixed by the interface.
export const ENGINE_MOUNT = '/opt/claude';
export const ENGINE_BINARY = `${ENGINE_MOUNT}/claude`;
/** The session's engine config directory (CLAUDE_CONFIG_DIR) is mounted here. */
export const ENGINE_CONFIG_DIR = '/var/lib/berth/engine';
/** Podman secrets for environment variables are mounted as files here, one per variable. */
export const SECRET_ENV_DIR = '/run/berth/env';
/** Input files (prompt, system prompts) are uploaded below /tmp, which every image has. */
export const INPUT_PARENT_DIR = '/tmp';
export const INPUT_DIR_NAME = 'berth-input';
export const INPUT_DIR = `${INPUT_PARENT_DIR}/${INPUT_DIR_NAME}`;
export const PROMPT_FILE = `${INPUT_DIR}/prompt`;
