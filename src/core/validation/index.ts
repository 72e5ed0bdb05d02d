// The validation layer: a run request in, a RunPlan or a BerthError out. See docs/security.md.
export { validateRunRequest, sessionIntent, type ValidationContext, type ValidationSettings } from './validate-run.js';
export {
  ALLOWED_MOUNT_OPTIONS, BERTH_MOUNT_POINTS, BLOCKED_CONTAINER_PATHS, BLOCKED_HOME_ENTRIES, blockedPathReason,
  checkContainerPath, checkDistinctTargets, hostPathPolicy, isUnder, mountTargetReason, nodeRealpathFs, normaliseAbsolutePath,
  parseVolumeSpec, protectedHostPaths, resolveAllowedHostPath, resolveHostPath, toVolumeMount, validateVolumes,
  type HostPathPolicy, type HostPathSettings, type ProtectedHostPath, type ProtectedPathSettings, type RealpathFs, type VolumeSpec,
} from './volumes.js';
export { validateWorkdir } from './paths.js';
export {
  formatImageReference, imageMatchesPatterns, imagePatternToRegExp, normaliseImageReference, parseImageReference,
  validateImage, type ImagePolicy, type ImageReference,
} from './images.js';
export {
  BLOCKED_VARIABLES, BLOCKED_VARIABLE_PREFIXES, MAX_SECRETS_ENV, blockedVariableReason, checkSecretsEnv, checkSecretsExist,
  validateSecretsEnv, type SecretsPolicy,
} from './secrets-env.js';
export {
  DEFAULT_HOOKS_TIMEOUT_MS, checkCpuShares, checkCpus, checkDuration, checkMemory, formatMemory, validateHooksTimeout,
  validateLimits, type Limits, type LimitsPolicy,
} from './limits.js';
export {
  checkCharacters, checkHookCommands, checkModel, checkOptionalText, checkPrompt, checkSessionId, checkSize, checkToolNames,
  checkWebhookUrl, findControlCharacter, hasLoneSurrogate,
} from './text.js';
