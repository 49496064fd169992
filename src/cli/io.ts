/** Where a CLI invocation reads its environment and writes its output: the process, or a test's buffers. */
export interface Io {
  stdout: (text: string) => void
  stderr: (text: string) => void
  env: Readonly<Record<string, string | undefined>>
  /** stderr is a terminal: long commands (import) show progress there. Absent: not a terminal. */
  stderrIsTTY?: boolean
  /** The terminal's width, when stderr is one. */
  stderrColumns?: number
}

export const defaultIo: Io = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
  stderrIsTTY: process.stderr.isTTY === true,
  get stderrColumns () { return process.stderr.columns }
}
