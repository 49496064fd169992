/**
 * `petstore import FILE`: the file is streamed through the domain's reader (never held as one string), then the
 * validated records are written in one store transaction. With progress on, stderr shows one status line for
 * each phase; the summary line follows either way.
 */
import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import { basename } from 'node:path'
import { ImportError, importData, readImport } from '../domain/import.js'
import type { ImportResult } from '../store/catalog/types.js'
import type { Store } from '../store/store.js'
import type { Clock, Io } from './io.js'
import { ImportProgress, StatusLine } from './progress.js'

/** A failure to read the file (as opposed to a problem with its content). */
class ReadFailure extends Error {
  constructor (readonly code: string) {
    super(code)
  }
}

function readFailure (error: unknown): ReadFailure {
  return new ReadFailure((error as NodeJS.ErrnoException).code ?? (error as Error).message)
}

/** Imports FILE; returns the exit code. A file it cannot read or rejects (ImportError) is reported: nothing imported. */
export async function importFile (
  file: string, io: Io, withStore: (work: (store: Store) => Promise<ImportResult>) => Promise<ImportResult>,
  { showProgress, clock }: { showProgress: boolean, clock: Clock }
): Promise<number> {
  let size: number | null
  try {
    const info = await stat(file)
    size = info.isFile() ? info.size : null
  } catch (error) {
    io.stderr(`petstore: cannot read ${file}: ${readFailure(error).code}\n`)
    return 1
  }
  const progress = new ImportProgress(
    new StatusLine(io.stderr, { enabled: showProgress, columns: io.stderrColumns, now: clock }), basename(file), size)

  let bytes = 0
  async function * chunks (): AsyncGenerator<Buffer> {
    try {
      for await (const chunk of createReadStream(file)) {
        bytes += (chunk as Buffer).length
        yield chunk as Buffer
      }
    } catch (error) {
      throw readFailure(error)
    }
  }

  try {
    let records = 0
    const data = await readImport(chunks, {
      onRecord: (n) => {
        records = n
        progress.reading(bytes, n)
      }
    })
    progress.reading(bytes, records, true)
    progress.writing(0, data.pets.length + data.orders.length)
    const result = await withStore((store) => importData(store, data, { onProgress: (written, total) => progress.writing(written, total), at: new Date(clock()) }))
    progress.finish()
    io.stderr(`Imported ${result.pets} pet(s) and ${result.orders} order(s) from ${file}.\n`)
    if (result.keptOrders !== undefined) {
      // Not a failure: the order placed through the API (its hold, its sale) is what the store keeps.
      io.stderr(`Left ${result.keptOrders.length} order(s) as they are, placed through the API with the same id: ${result.keptOrders.join(', ')}.\n`)
    }
    return 0
  } catch (error) {
    progress.abort()
    if (error instanceof ReadFailure) {
      io.stderr(`petstore: cannot read ${file}: ${error.code}\n`)
      return 1
    }
    if (error instanceof ImportError) {
      io.stderr(`petstore: import rejected, nothing was imported: ${error.message}\n`)
      return 1
    }
    throw error
  }
}
