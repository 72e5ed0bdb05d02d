// One object made of several parts' methods: how the Podman runtime is one ContainerRuntime while each
// concern (containers, images, networks…) is a class of its own.

/** The intersection of a tuple's element types: [A, B, C] gives A & B & C. */
type Joined<Parts extends readonly object[]> = (Parts[number] extends infer Part ? (Part extends unknown ? (part: Part) => void : never) : never) extends (
  joined: infer All,
) => void
  ? All
  : never;

/**
 * Every public method of each part (those of its class and the classes it extends; `#private` ones are no
 * properties and stay inside), bound to its part, as an own, writable property of one plain object: a
 * method replaced on the object later (a test wrapping createContainer) is the one its callers then get.
 * Throws when two parts define a method of the same name, which would otherwise silently hide one.
 */
export function joinParts<Parts extends readonly object[]>(...parts: Parts): Joined<Parts> {
  const joined: Record<string, unknown> = {};
  for (const part of parts) {
    const taken = new Set<string>();
    for (let proto: object | null = Object.getPrototypeOf(part) as object | null; proto !== null && proto !== Object.prototype; proto = Object.getPrototypeOf(proto) as object | null) {
      for (const name of Object.getOwnPropertyNames(proto)) {
        const method: unknown = Object.getOwnPropertyDescriptor(proto, name)?.value;
        // A name already taken from this part is its override in a subclass, met first.
        if (name === 'constructor' || typeof method !== 'function' || taken.has(name)) continue;
        if (name in joined) throw new Error(`two parts define ${name}: one would hide the other`);
        taken.add(name);
        joined[name] = (method as (...args: unknown[]) => unknown).bind(part);
      }
    }
  }
  return joined as Joined<Parts>;
}
