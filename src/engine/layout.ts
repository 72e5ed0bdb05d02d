// Where things live inside an agent container. The engine path is fixed by the interface.
export const ENGINE_MOUNT = '/opt/claude';
export const ENGINE_BINARY = `${ENGINE_MOUNT}/claude`;
/** The session's engine config directory (CLAUDE_CONFIG_DIR) is mounted here. */
export const ENGINE_CONFIG_DIR = '/var/lib/berth/engine';
/**
 * HOME of an engine container with a disk limit: the image's own home is on its read-only root file system,
 * so HOME is a directory of the run's disk, under /var/lib/berth where no caller volume may be mounted.
 */
export const ENGINE_HOME = '/var/lib/berth/home';
/** Podman secrets for environment variables are mounted as files here, one per variable. */
export const SECRET_ENV_DIR = '/run/berth/env';
/**
 * The run's input files (prompt, system prompts, hooks) are bind-mounted read-only here from a host
 * directory of their own: no caller text passes through argv or a shell, and no copy into the container's
 * filesystem is needed (Podman's archive upload costs ~130 ms a run). /run/berth is blocked for volumes.
 */
export const INPUT_DIR = '/run/berth/input';
export const PROMPT_FILE = `${INPUT_DIR}/prompt`;
/**
 * The variables that send the engine (and lifecycle hooks) through Berth's model gateway and egress proxy
 * with the run's own credential, `NAME=value` a line: exported by the launch script, so that they are not
 * in the container's configuration as Podman stores and shows it (`podman inspect`).
 */
export const GATEWAY_ENV_FILE_NAME = 'gateway.env';
export const GATEWAY_ENV_FILE = `${INPUT_DIR}/${GATEWAY_ENV_FILE_NAME}`;
/**
 * A persistent agent's engine reads its turns from this FIFO (created by Berth in the agent's input
 * directory), opened read-write so that it never sees an end of input: the agent outlives a Berth process
 * that dies, and the next one writes to the same FIFO again.
 */
export const AGENT_INPUT_FIFO_NAME = 'turns';
export const AGENT_INPUT_FIFO = `${INPUT_DIR}/${AGENT_INPUT_FIFO_NAME}`;
