// The discriminators the tests call definitions by: the built-in ones of their accounts (vendor
// "vendor1", from the default VENDOR) and the user-created ones their manifests name.

export const NS = 'com.vendor1';

/** A built-in keyspace, channel or attribute, e.g. `builtIn('keyspaces', 'email')`. */
export const builtIn = (kind: 'keyspaces' | 'channels' | 'attributes', name: string): string => `${NS}.${kind}.${name}`;

/** A definition of a manifest, named `name` there, e.g. `userCreated('sections', 'shop')`. */
export const userCreated = (kind: 'sections' | 'attributes' | 'topics' | 'tags' | 'segments', name: string): string =>
  `${NS}.${kind}.user-created.${name}`;
