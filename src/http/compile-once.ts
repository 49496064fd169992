/**
 * Each schema compiled once per process (docs/adr/0051-each-schema-compiled-once-per-process.md): `compile` wrapped so
 * that what it made is kept by the schema's JSON text, not by the object, because routes build some schemas afresh on
 * each registration. An app built again (a worker's, a test's) then reuses the validators and serializers instead of
 * compiling every route anew. What is kept must hold no state a caller could see from another app's calls.
 */
export function compileOnce<T> (compile: (schema: object) => T): (schema: object) => T {
  const compiled = new Map<string, T>()
  return (schema) => {
    const key = JSON.stringify(schema)
    let made = compiled.get(key)
    if (made === undefined) {
      made = compile(schema)
      compiled.set(key, made)
    }
    return made
  }
}
