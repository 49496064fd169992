import { readFileSync } from 'node:fs'

/**
 * The release version, as package.json gives it: what `petstore --version`, /healthz and the build-info metric
 * report. Read once, from the package root (one level above both src/ and dist/).
 */
export const VERSION: string = readVersion()

function readVersion(): string {
  const manifest = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version?: unknown }
  if (typeof manifest.version !== 'string') throw new Error('package.json has no version')
  return manifest.version
}
