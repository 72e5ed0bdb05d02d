// The labels Berth puts on what it creates in the runtime (containers, networks, volumes, images): how a
// restart, the reaper and the tests find what belongs to whom.

export const RUN_LABEL = 'berth.run';
/**
 * On an engine the pool pre-started (core/pool), its pool's kind (`run` or `agent`); kept after a claim
 * (labels cannot change), when the container's name says it is a run's or an agent's (`berth-run-…`,
 * `berth-agent-…`, not `berth-pool-…`).
 */
export const POOL_LABEL = 'berth.pool';
export const PROBE_LABEL = 'berth.probe';
export const INSTANCE_LABEL = 'berth.instance';
/** On the never-started container that holds an image's files mounted for the instance named by its value. */
export const IMAGE_TREE_LABEL = 'berth.image-tree';
/** On every container, network and volume of a compose stack: the session it belongs to. */
export const STACK_LABEL = 'berth.stack';
/** The Berth instance that created a stack (stacks outlive the process; a restart adopts or reaps its own). */
export const STACK_INSTANCE_LABEL = 'berth.stack-instance';
/** The stack definition's hash (core/compose-file/stack-definition.ts), on the stack's network. */
export const STACK_HASH_LABEL = 'berth.stack-hash';
/** On the images a stack built: the definition hash they were built for. */
export const STACK_BUILD_LABEL = 'berth.stack-build';
/** On a container holding a model-gateway credential that is not its run's (a stack service's): that grant's id. */
export const GRANT_LABEL = 'berth.grant';

/** A runtime object (network, volume) found by label. */
export interface LabelledObject {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
}
