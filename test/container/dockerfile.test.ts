/**
 * The images a build of the Dockerfile pulls, read from the file the way BuildKit resolves them (the global ARGs,
 * their defaults expanded with the ARGs before them, then each FROM): a build given NODE_IMAGE alone, on a machine
 * that reaches only that image's registry (a mirror), must not reach for any other. Needs no Docker engine.
 */
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { ROOT } from './docker.js'

/** `${NAME}` and `$NAME` replaced from `args` (the Dockerfile uses no other form of substitution). */
function expand (text: string, args: ReadonlyMap<string, string>): string {
  return text.replace(/\$\{(\w+)\}|\$(\w+)/g, (_match, braced: string | undefined, bare: string | undefined) => args.get(braced ?? bare ?? '') ?? '')
}

/** The images the FROM lines name (stages and `scratch` left out), with `buildArgs` given as --build-arg. */
function pulledBases (dockerfile: string, buildArgs: Record<string, string>): string[] {
  const lines = dockerfile.replace(/\\\n/g, ' ').split('\n').map((line) => line.trim()).filter((line) => line !== '' && !line.startsWith('#'))
  const args = new Map<string, string>()
  const stages = new Set<string>()
  const bases: string[] = []
  for (const line of lines) {
    const arg = /^ARG\s+(\w+)(?:=(\S*))?$/i.exec(line)
    if (arg !== null && stages.size === 0 && bases.length === 0) {
      const [, name = '', value] = arg
      const given = buildArgs[name]
      if (given !== undefined) args.set(name, given)
      else if (value !== undefined) args.set(name, expand(value, args))
      continue
    }
    const from = /^FROM\s+(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(line)
    if (from === null) continue
    const image = expand(from[1] ?? '', args)
    if (image !== 'scratch' && !stages.has(image)) bases.push(image)
    if (from[2] !== undefined) stages.add(from[2])
  }
  return [...new Set(bases)]
}

const DOCKERFILE = readFileSync(join(ROOT, 'Dockerfile'), 'utf8')

describe('the base images of the Dockerfile', () => {
  test('when built without build arguments, then it pulls the official Node image only', () => {
    assert.deepEqual(pulledBases(DOCKERFILE, {}), ['node:24-bookworm-slim'])
  })

  test('when given NODE_IMAGE alone, then that is the one image it pulls', () => {
    for (const image of ['node:22-bookworm-slim', 'registry.example.com/mirror/node:26-bookworm-slim']) {
      assert.deepEqual(pulledBases(DOCKERFILE, { NODE_IMAGE: image }), [image])
    }
  })

  test('when given RUNTIME_IMAGE too, then the runtime is built on it', () => {
    assert.deepEqual(pulledBases(DOCKERFILE, { NODE_IMAGE: 'node:22-bookworm-slim', RUNTIME_IMAGE: 'debian:bookworm-slim' }),
      ['node:22-bookworm-slim', 'debian:bookworm-slim'])
  })

  test('when a Dockerfile names a second base by default, then the reading finds it', () => {
    const twoBases = 'ARG NODE_IMAGE=node:24-bookworm-slim\nARG RUNTIME_IMAGE=debian:bookworm-slim\nFROM ${NODE_IMAGE} AS build\nFROM ${RUNTIME_IMAGE}\n'
    assert.deepEqual(pulledBases(twoBases, { NODE_IMAGE: 'node:22-bookworm-slim' }), ['node:22-bookworm-slim', 'debian:bookworm-slim'])
  })
})
