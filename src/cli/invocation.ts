/**
 * How a person runs this CLI, for the messages that tell them a command to type (the start line's "Create a key
 * with", "run ... migrate first", "Run ... help for usage"). Usage texts name the program, `petstore`, as any CLI's
 * do; a command to copy must work where it is pasted.
 */
import { basename, delimiter, dirname, resolve } from 'node:path'

/**
 * `petstore` when the script was started from a directory on PATH under that name: the image's /usr/local/bin, a
 * global install. `npx petstore` otherwise: a checkout's bin/petstore.js, `npm start`, or a project's
 * node_modules/.bin (npx puts that directory on PATH while it runs, but a shell of its user does not have it), where
 * npx finds the command again; the image has no npx, and there the first rule applies.
 *
 * `script` is the path the process was started with (process.argv[1], not resolved through symlinks); `path` is PATH.
 */
export function cliCommand (script: string | undefined, path: string | undefined): string {
  if (script === undefined) return 'petstore'
  const dir = resolve(dirname(script))
  const inNodeModules = basename(dir) === '.bin' && basename(dirname(dir)) === 'node_modules'
  const onPath = (path ?? '').split(delimiter).some((entry) => entry !== '' && resolve(entry) === dir)
  return !inNodeModules && onPath && basename(script) === 'petstore' ? 'petstore' : 'npx petstore'
}
