/**
 * The process test/store/sqlite-checkpoints.test.ts kills: a serving store on FILE whose thread checkpoints every 20
 * frames, updating every one of PETS pets (at once, so group commits hold many) round after round from FIRST on, each
 * pet to round x 1000 + (id - 1). Prints `ack ROUND` once every update of a round is answered, and `checkpoint` after
 * each checkpoint of the thread that copied frames.
 *
 *   node --import tsx test/store/sqlite-checkpoint-writer.ts FILE PETS FIRST
 */
import { SqliteStore } from '../../src/store/sqlite-store.js'
import { setStock } from './helpers.js'

const [path, petsArg, firstArg] = process.argv.slice(2)
if (path === undefined || petsArg === undefined || firstArg === undefined) throw new Error('usage: FILE PETS FIRST')
const pets = Number(petsArg)
const store = new SqliteStore(path, {
  backgroundCheckpoints: {
    thresholdFrames: 20,
    pollMs: 1,
    onCheckpoint: (report) => { if (report.checkpointed > 0) process.stdout.write('checkpoint\n') }
  }
})
for (let round = Number(firstArg); ; round++) {
  await Promise.all(Array.from({ length: pets }, (_, i) => setStock(store, BigInt(i + 1), round * 1000 + i)))
  process.stdout.write(`ack ${round}\n`)
}
