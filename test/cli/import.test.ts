import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { describe, test } from 'node:test'
import type { SqliteStore } from '../../src/store/sqlite-store.js'
import { cliFor, inspectStore } from './run.js'

const DEMO = fileURLToPath(new URL('../../data/demo.json', import.meta.url))
const BIG = 9007199254740993n // 2^53 + 1: a double cannot hold it
const INT64_MAX = 9223372036854775807n
const INT64_MIN = -9223372036854775808n

const VALID_PET = '{ "id": 1, "name": "Rex", "status": "available", "quantity": 3 }'
const VALID_ORDER = '{ "id": 1, "petId": 1, "quantity": 1, "shipDate": "2026-11-20T10:00:00Z", "status": "placed", "complete": false }'

/** Pets in the large files: enough that reading and writing take many chunks and many progress steps. */
const MANY = 100_000

/** The id of pet i in a large file: i + 1, except that every 25,000th id lies above 2^53. */
function manyId (i: number): bigint {
  return i % 25_000 === 24_999 ? BIG + BigInt(i) : BigInt(i + 1)
}

function manyPet (i: number): string {
  return `{"id":${manyId(i)},"name":"Pet ${i}","status":"${['available', 'pending', 'sold'][i % 3] as string}","quantity":${i % 50},` +
    `"category":{"id":${i % 5 + 1},"name":"Category ${i % 5}"},"tags":[{"id":${i % 7 + 1},"name":"tag ${i % 7}"}],` +
    `"photoUrls":["https://images.petstore.example/pets/${i}.jpg"]}`
}

/** `{"pets": [...]}` with `count` pets, one a line; `replace(i)` may give pet i's JSON text instead. */
function manyPets (count: number, replace: (i: number) => string | undefined = () => undefined): string {
  const lines: string[] = []
  for (let i = 0; i < count; i++) lines.push(replace(i) ?? manyPet(i))
  return `{"pets": [\n${lines.join(',\n')}\n]}\n`
}

/** The terminal code that erases the rest of the line after a redrawn status line. */
const ERASE = '\x1b[K'

/** The percentages of one phase's progress line ("Reading ...: 45% (...)"), in the order drawn. */
function percentages (stderr: string, phase: RegExp): number[] {
  return stderr.split('\r').flatMap((line) => {
    const match = phase.exec(line)
    return match === null ? [] : [Number(match[1])]
  })
}

async function contents (store: SqliteStore) {
  return {
    pets: await store.catalog.countPets(),
    inventory: await store.stock.listInventory(),
    orders: (await store.catalog.listOrders({ afterId: null, limit: 1000, status: null })).orders
  }
}

describe('petstore import', () => {
  test('when the demo file is imported, then pets, stock and orders are stored with exact int64 ids', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['import', DEMO])
    assert.equal(res.code, 0, res.stderr)
    assert.equal(res.stdout, '')
    assert.equal(res.stderr, `Imported 7 pet(s) and 5 order(s) from ${DEMO}.\n`)

    await inspectStore(cli.db, async (store) => {
      const { pets, inventory, orders } = await contents(store)
      assert.equal(pets, 7)
      assert.deepEqual(inventory.map((i) => i.petId), [1n, 2n, 3n, 4n, 5n, BIG])
      assert.deepEqual(inventory.at(-1), { petId: BIG, quantity: 1, status: 'available' })
      assert.deepEqual(await store.catalog.getPet(BIG), {
        id: BIG, name: 'Big Id', status: 'available', tags: [{ id: INT64_MAX, name: 'int64-max' }]
      })
      assert.equal(await store.catalog.getPet(BIG - 1n), null, 'not rounded to 2^53')
      assert.deepEqual(orders.at(-1), {
        id: BIG, petId: BIG, quantity: 1, shipDate: '2026-11-22T12:00:00Z', status: 'placed', complete: false
      })
      assert.deepEqual(await store.catalog.getPet(1n), {
        id: 1n,
        name: 'Rex',
        status: 'available',
        category: { id: 1n, name: 'Dogs' },
        tags: [{ id: 1n, name: 'friendly' }],
        photoUrls: ['https://images.petstore.example/rex.jpg']
      })
    })
  })

  test('when ids sit at the int64 edges, then they are stored exactly', async (t) => {
    const cli = cliFor(t)
    const file = cli.file('edges.json', `{
      "pets": [
        { "id": 9223372036854775807, "name": "max", "status": "sold", "quantity": 0,
          "category": { "id": -9223372036854775808, "name": "min" } },
        { "id": -9223372036854775808, "name": "min", "status": "pending", "quantity": 1000000000 }
      ],
      "orders": [
        { "id": 9223372036854775807, "petId": -9223372036854775808, "quantity": 2147483647,
          "shipDate": "2026-11-20T10:00:00.123+02:00", "status": "approved", "complete": true }
      ]
    }`)
    const res = await cli.run(['import', file])
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stderr, /Imported 2 pet\(s\) and 1 order\(s\)/)

    await inspectStore(cli.db, async (store) => {
      const { inventory, orders } = await contents(store)
      assert.deepEqual(inventory, [
        { petId: INT64_MIN, quantity: 1000000000, status: 'pending' },
        { petId: INT64_MAX, quantity: 0, status: 'sold' }
      ])
      assert.deepEqual((await store.catalog.getPet(INT64_MAX))?.category, { id: INT64_MIN, name: 'min' })
      assert.deepEqual(orders, [{
        id: INT64_MAX, petId: INT64_MIN, quantity: 2147483647, shipDate: '2026-11-20T10:00:00.123+02:00', status: 'approved', complete: true
      }])
    })
  })

  test('when a pet has no quantity, then it is stored without a stock entry', async (t) => {
    const cli = cliFor(t)
    const file = cli.file('pets.json', '{ "pets": [{ "id": 6, "name": "Nibbles", "status": "available" }] }')
    assert.equal((await cli.run(['import', file])).code, 0)
    await inspectStore(cli.db, async (store) => {
      assert.equal(await store.catalog.countPets(), 1)
      assert.deepEqual(await store.stock.listInventory(), [])
    })
  })

  test('when the same ids are imported again, then the records are replaced, not duplicated', async (t) => {
    const cli = cliFor(t)
    const first = cli.file('first.json', `{
      "pets": [{ "id": 1, "name": "Rex", "status": "available", "quantity": 3, "category": { "id": 1, "name": "Dogs" } },
               { "id": 2, "name": "Tom", "status": "available", "quantity": 1 }],
      "orders": [${VALID_ORDER}]
    }`)
    const second = cli.file('second.json', `{
      "pets": [{ "id": 1, "name": "Rex the Second", "status": "pending", "quantity": 9 }],
      "orders": [{ "id": 1, "petId": 2, "quantity": 4, "shipDate": "2026-12-01T08:00:00Z", "status": "delivered", "complete": true }]
    }`)
    assert.equal((await cli.run(['import', first])).code, 0)
    const res = await cli.run(['import', second])
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stderr, /Imported 1 pet\(s\) and 1 order\(s\)/)

    await inspectStore(cli.db, async (store) => {
      const { pets, inventory, orders } = await contents(store)
      assert.equal(pets, 2)
      assert.deepEqual(await store.catalog.getPet(1n), { id: 1n, name: 'Rex the Second', status: 'pending' })
      assert.deepEqual(inventory, [
        { petId: 1n, quantity: 9, status: 'pending' },
        { petId: 2n, quantity: 1, status: 'available' }
      ])
      assert.deepEqual(orders, [
        { id: 1n, petId: 2n, quantity: 4, shipDate: '2026-12-01T08:00:00Z', status: 'delivered', complete: true }
      ])
    })
  })

  test('when an order of the file has the id of an order placed through the API, then that order is left as it is and the summary says so', async (t) => {
    const cli = cliFor(t)
    assert.equal((await cli.run(['import', cli.file('pets.json', `{ "pets": [${VALID_PET}] }`)])).code, 0)
    const placed = await inspectStore(cli.db, async (store) => {
      const result = await store.selling.placeHold({
        id: 'hold_AAAAAAAAAAAAAAAAAAAA', lines: [{ petId: 1n, quantity: 2 }], reference: 'web', expiresAt: null, order: { shipDate: '2026-12-01T09:00:00Z' },
        caps: { activeHolds: 10, heldUnits: 10 }, quotaId: 'key_a', keyId: 'key_a', requestId: null, at: new Date()
      })
      return result.status === 'placed' ? result.order : assert.fail(result.status)
    })
    const id = placed?.id ?? assert.fail('no order')
    const res = await cli.run(['import', cli.file('orders.json', `{ "orders": [${VALID_ORDER.replace('"id": 1', `"id": ${id}`)},
      ${VALID_ORDER.replace('"id": 1', `"id": ${id + 1n}`)}] }`)])
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stderr, /Imported 0 pet\(s\) and 1 order\(s\)/)
    assert.match(res.stderr, new RegExp(`Left 1 order\\(s\\) as they are, placed through the API with the same id: ${id}\\.`))
    await inspectStore(cli.db, async (store) => {
      assert.deepEqual(await store.selling.getOrder(id), placed)
      assert.equal((await store.selling.getOrder(id + 1n))?.source, 'import')
    })
  })

  test('when 100,000 pets are imported, then all are stored with exact int64 ids and stderr holds only the summary', async (t) => {
    const cli = cliFor(t)
    const file = cli.file('many.json', manyPets(MANY))
    const res = await cli.run(['import', file])
    assert.equal(res.code, 0, res.stderr)
    // stderr is a pipe here, not a terminal: no progress lines, so logs stay clean.
    assert.equal(res.stderr, `Imported 100000 pet(s) and 0 order(s) from ${file}.\n`)

    await inspectStore(cli.db, async (store) => {
      assert.equal(await store.catalog.countPets(), MANY)
      assert.deepEqual(await store.catalog.getPet(1n), {
        id: 1n,
        name: 'Pet 0',
        status: 'available',
        category: { id: 1n, name: 'Category 0' },
        tags: [{ id: 1n, name: 'tag 0' }],
        photoUrls: ['https://images.petstore.example/pets/0.jpg']
      })
      assert.equal((await store.catalog.getPet(BIG + 99_999n))?.name, 'Pet 99999')
      assert.equal((await store.catalog.getPet(BIG + 24_999n))?.name, 'Pet 24999')
      assert.equal(await store.catalog.getPet(BIG + 24_998n), null, 'not rounded to a neighbouring double')
      assert.equal((await store.catalog.getPet(99_999n))?.name, 'Pet 99998')
    })
  })

  test('when progress is forced, then stderr shows one line per phase rising to 100%, then the summary', async (t) => {
    const cli = cliFor(t)
    const file = cli.file('many.json', manyPets(20_000))
    const res = await cli.run(['import', '--progress', file])
    assert.equal(res.code, 0, res.stderr)
    assert.ok(res.stderr.startsWith('\rReading many.json: '), res.stderr)
    assert.ok(res.stderr.includes(ERASE))
    const stderr = res.stderr.replaceAll(ERASE, '')

    const reading = percentages(stderr, /^Reading many\.json: (\d+)% \([\d.]+ [kM]?B of [\d.]+ MB\), [\d,]+ records$/)
    const writing = percentages(stderr, /^Writing: (\d+)% \([\d,]+ of 20,000 records\)/)
    for (const [phase, seen] of [['reading', reading], ['writing', writing]] as const) {
      assert.ok(seen.length >= 2, `${phase}: ${res.stderr}`)
      assert.ok((seen[0] as number) < 100, `${phase} starts below 100%: ${seen.join(' ')}`)
      assert.deepEqual(seen, [...seen].sort((a, b) => a - b), `${phase} only rises: ${seen.join(' ')}`)
      assert.equal(seen.at(-1), 100, phase)
    }
    assert.match(stderr, /Reading many\.json: 100% \([\d.]+ MB of [\d.]+ MB\), 20,000 records/)
    // One status line redrawn in place: the only newlines end the progress line and the summary.
    assert.match(stderr, /\rWriting: 100% \(20,000 of 20,000 records\)\nImported 20000 pet\(s\) and 0 order\(s\) from .*many\.json\.\n$/)
    assert.equal(stderr.split('\n').length, 3)
    await inspectStore(cli.db, async (store) => assert.equal(await store.catalog.countPets(), 20_000))
  })

  test('when progress is switched off, then stderr holds only the summary', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['import', '--no-progress', DEMO])
    assert.equal(res.code, 0, res.stderr)
    assert.equal(res.stderr, `Imported 7 pet(s) and 5 order(s) from ${DEMO}.\n`)
  })

  test('when --progress and --no-progress are both given, then it exits 2', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['import', '--progress', '--no-progress', DEMO])
    assert.equal(res.code, 2)
    assert.match(res.stderr, /either --progress or --no-progress/)
  })

  test('when the last of 100,000 pets is bad, then nothing is imported and pets[99999] is named', async (t) => {
    const cli = cliFor(t)
    const file = cli.file('many.json', manyPets(MANY, (i) => i === 99_999 ? '{"id":100000,"name":"Last","status":"lost"}' : undefined))
    const res = await cli.run(['import', '--progress', file])
    assert.equal(res.code, 1, res.stderr)
    // The progress line is erased first, so the message starts on a clean line.
    assert.ok(res.stderr.endsWith(`\r${ERASE}petstore: import rejected, nothing was imported: pets[99999].status must be one of available, pending, sold\n`), res.stderr)
    await inspectStore(cli.db, async (store) => assert.equal(await store.catalog.countPets(), 0))
  })

  test('when two pets far apart share an id, then nothing is imported and both places are named', async (t) => {
    const cli = cliFor(t)
    const file = cli.file('many.json', manyPets(MANY, (i) => i === 99_998 ? '{"id":6,"name":"Again","status":"available"}' : undefined))
    const res = await cli.run(['import', file])
    assert.equal(res.code, 1, res.stderr)
    assert.match(res.stderr, /pets\[99998\]\.id 6 repeats pets\[5\]\.id/)
    await inspectStore(cli.db, async (store) => assert.equal(await store.catalog.countPets(), 0))
  })

  test('when a large file is cut off in the middle, then nothing is imported and the cut record is named', async (t) => {
    const cli = cliFor(t)
    const text = manyPets(MANY)
    const cut = text.indexOf('"name":"Pet 60000"')
    const res = await cli.run(['import', cli.file('cut.json', text.slice(0, cut))])
    assert.equal(res.code, 1, res.stderr)
    assert.match(res.stderr, /nothing was imported: the file is not valid JSON: it ends before the JSON is complete \(inside pets\[60000\]\)/)
    await inspectStore(cli.db, async (store) => assert.equal(await store.catalog.countPets(), 0))
  })

  test('when a large file has a syntax error, then nothing is imported and its line and column are named', async (t) => {
    const cli = cliFor(t)
    // Line 1 is `{"pets": [`, so pet i is on line i + 2.
    const file = cli.file('many.json', manyPets(MANY, (i) => i === 80_000 ? '{"id":80001,,"name":"x","status":"sold"}' : undefined))
    const res = await cli.run(['import', file])
    assert.equal(res.code, 1, res.stderr)
    assert.match(res.stderr, /nothing was imported: the file is not valid JSON: expected an object key at line 80002, column 13\n$/)
    await inspectStore(cli.db, async (store) => assert.equal(await store.catalog.countPets(), 0))
  })

  test('when the file is empty, then it exits 1 saying so', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['import', cli.file('empty.json', '')])
    assert.equal(res.code, 1)
    assert.equal(res.stderr, 'petstore: import rejected, nothing was imported: the file is not valid JSON: it is empty\n')
  })

  test('when the file holds no pets and no orders, then it imports nothing and exits 0', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['import', cli.file('empty.json', '{}')])
    assert.equal(res.code, 0, res.stderr)
    assert.match(res.stderr, /Imported 0 pet\(s\) and 0 order\(s\)/)
  })

  // Each bad file starts with valid records, so "nothing imported" shows the import is all or nothing.
  const bad: Array<{ what: string, json: string, field: RegExp }> = [
    {
      what: 'pets[1] has an unknown status',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "lost" }] }`,
      field: /pets\[1\]\.status must be one of available, pending, sold/
    },
    {
      what: 'pets[1] has no name',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "status": "available" }] }`,
      field: /pets\[1\] is missing the required field "name"/
    },
    {
      what: 'pets[1] has an empty name',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "", "status": "available" }] }`,
      field: /pets\[1\]\.name must be a non-empty string/
    },
    {
      what: 'pets[1] has an unknown field',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "colour": "grey" }] }`,
      field: /pets\[1\]\.colour is not a known field/
    },
    {
      what: 'pets[1] has a fractional quantity',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "quantity": 1.5 }] }`,
      field: /pets\[1\]\.quantity must be an integer\n/
    },
    {
      what: 'pets[1] has a quantity in exponent form',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "quantity": 1e3 }] }`,
      field: /pets\[1\]\.quantity must be an integer\n/
    },
    {
      what: 'pets[1] has an id written with a fraction',
      json: `{ "pets": [${VALID_PET}, { "id": 2.0, "name": "Tom", "status": "available" }] }`,
      field: /pets\[1\]\.id must be an integer within int64/
    },
    {
      what: 'pets[1] has a "__proto__" field',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "__proto__": { "status": "sold" } }] }`,
      field: /pets\[1\]\.__proto__ is not a known field/
    },
    {
      what: 'the file repeats the "pets" key',
      json: `{ "pets": [${VALID_PET}], "pets": [] }`,
      field: /the file is not valid JSON: the top-level key "pets" appears twice/
    },
    {
      what: 'pets[1] is not an object',
      json: `{ "pets": [${VALID_PET}, 2] }`,
      field: /pets\[1\] must be an object/
    },
    {
      what: 'pets[1] has a negative quantity',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "quantity": -1 }] }`,
      field: /pets\[1\]\.quantity must be an integer from 0 to 1000000000/
    },
    {
      what: 'pets[1] has a quantity above one billion',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "quantity": 1000000001 }] }`,
      field: /pets\[1\]\.quantity must be an integer/
    },
    {
      what: 'pets[1] has an id beyond int64',
      json: `{ "pets": [${VALID_PET}, { "id": 9223372036854775808, "name": "Tom", "status": "available" }] }`,
      field: /pets\[1\]\.id must be an integer within int64/
    },
    {
      what: 'pets[1] has a string id',
      json: `{ "pets": [${VALID_PET}, { "id": "2", "name": "Tom", "status": "available" }] }`,
      field: /pets\[1\]\.id must be an integer within int64/
    },
    {
      what: 'pets[1] repeats the id of pets[0]',
      json: `{ "pets": [${VALID_PET}, { "id": 1, "name": "Rex again", "status": "available" }] }`,
      field: /pets\[1\]\.id 1 repeats pets\[0\]\.id/
    },
    {
      what: 'a tag id of pets[1] is beyond int64',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "tags": [{ "id": 1, "name": "a" }, { "id": 9223372036854775808, "name": "b" }] }] }`,
      field: /pets\[1\]\.tags\[1\]\.id must be an integer within int64/
    },
    {
      what: 'the category of pets[1] has an unknown field',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "category": { "id": 1, "name": "Cats", "x": 1 } }] }`,
      field: /pets\[1\]\.category\.x is not a known field/
    },
    {
      what: 'a photo URL of pets[1] is empty',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "photoUrls": [""] }] }`,
      field: /pets\[1\]\.photoUrls\[0\] must be a non-empty string/
    },
    {
      what: 'orders[1] has a zero quantity',
      json: `{ "pets": [${VALID_PET}], "orders": [${VALID_ORDER}, { "id": 2, "petId": 1, "quantity": 0, "shipDate": "2026-11-20T10:00:00Z", "status": "placed", "complete": false }] }`,
      field: /orders\[1\]\.quantity must be an integer from 1 to 2147483647/
    },
    {
      what: 'orders[1] has a shipDate without an offset',
      json: `{ "pets": [${VALID_PET}], "orders": [${VALID_ORDER}, { "id": 2, "petId": 1, "quantity": 1, "shipDate": "2026-11-20T10:00:00", "status": "placed", "complete": false }] }`,
      field: /orders\[1\]\.shipDate must be a valid RFC 3339 date-time/
    },
    {
      what: 'orders[1] has a shipDate on a day the month does not have',
      json: `{ "pets": [${VALID_PET}], "orders": [${VALID_ORDER}, { "id": 2, "petId": 1, "quantity": 1, "shipDate": "2026-02-30T10:00:00Z", "status": "placed", "complete": false }] }`,
      field: /orders\[1\]\.shipDate must be a valid RFC 3339 date-time/
    },
    {
      what: 'orders[1] has a shipDate at hour 24',
      json: `{ "pets": [${VALID_PET}], "orders": [${VALID_ORDER}, { "id": 2, "petId": 1, "quantity": 1, "shipDate": "2026-11-20T24:00:00Z", "status": "placed", "complete": false }] }`,
      field: /orders\[1\]\.shipDate must be a valid RFC 3339 date-time/
    },
    {
      what: 'orders[1] has complete as a string',
      json: `{ "pets": [${VALID_PET}], "orders": [${VALID_ORDER}, { "id": 2, "petId": 1, "quantity": 1, "shipDate": "2026-11-20T10:00:00Z", "status": "placed", "complete": "yes" }] }`,
      field: /orders\[1\]\.complete must be true or false/
    },
    {
      what: 'orders[1] repeats the id of orders[0]',
      json: `{ "pets": [${VALID_PET}], "orders": [${VALID_ORDER}, ${VALID_ORDER}] }`,
      field: /orders\[1\]\.id 1 repeats orders\[0\]\.id/
    },
    {
      what: 'a pet name holds a right-to-left override',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom\\u202egpj.exe", "status": "available" }] }`,
      field: /pets\[1\]\.name must hold no control characters, line separators or bidirectional formatting characters/
    },
    {
      what: 'a category name holds a C1 control character',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "category": { "id": 1, "name": "Cats\\u009b2J" } }] }`,
      field: /pets\[1\]\.category\.name must hold no control characters/
    },
    {
      what: 'a tag name holds an isolate',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "tags": [{ "id": 1, "name": "\\u2066x" }] }] }`,
      field: /pets\[1\]\.tags\[0\]\.name must hold no control characters/
    },
    {
      what: 'a photo URL holds a line separator',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "Tom", "status": "available", "photoUrls": ["https://x.example/a\u2028b"] }] }`,
      field: /pets\[1\]\.photoUrls\[0\] must hold no control characters/
    },
    {
      what: 'a pet name is longer than the API allows',
      json: `{ "pets": [${VALID_PET}, { "id": 2, "name": "${'n'.repeat(201)}", "status": "available" }] }`,
      field: /pets\[1\]\.name must be a non-empty string of at most 200 characters/
    },
    {
      what: 'the file has an unknown top-level field',
      json: `{ "pets": [${VALID_PET}], "animals": [] }`,
      field: /file\.animals is not a known field/
    },
    {
      what: 'pets is not an array',
      json: `{ "pets": ${VALID_PET} }`,
      field: /file\.pets must be an array/
    },
    {
      what: 'the file holds an array instead of an object',
      json: `[${VALID_PET}]`,
      field: /the file must hold a JSON object/
    }
  ]
  for (const { what, json, field } of bad) {
    test(`when ${what}, then it exits 1 naming the record and field and imports nothing`, async (t) => {
      const cli = cliFor(t)
      const res = await cli.run(['import', cli.file('bad.json', json)])
      assert.equal(res.code, 1, res.stderr)
      assert.equal(res.stdout, '')
      assert.match(res.stderr, /^petstore: import rejected, nothing was imported: /)
      assert.match(res.stderr, field)
      await inspectStore(cli.db, async (store) => {
        assert.deepEqual(await contents(store), { pets: 0, inventory: [], orders: [] })
      })
    })
  }

  test('when a bad file follows a good import, then the earlier data stays exactly as it was', async (t) => {
    const cli = cliFor(t)
    assert.equal((await cli.run(['import', DEMO])).code, 0)
    const before = await inspectStore(cli.db, contents)
    const bad = cli.file('bad.json', `{
      "pets": [{ "id": 1, "name": "Renamed", "status": "sold", "quantity": 0 }, { "id": 2, "name": "Tom", "status": "lost" }]
    }`)
    const res = await cli.run(['import', bad])
    assert.equal(res.code, 1)
    assert.match(res.stderr, /pets\[1\]\.status/)
    const after = await inspectStore(cli.db, contents)
    assert.deepEqual(after, before)
    await inspectStore(cli.db, async (store) => assert.equal((await store.catalog.getPet(1n))?.name, 'Rex'))
  })

  test('when the file does not exist, then it exits 1 naming the file', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['import', 'missing.json'])
    assert.equal(res.code, 1)
    assert.equal(res.stdout, '')
    assert.equal(res.stderr, 'petstore: cannot read missing.json: ENOENT\n')
  })

  test('when the file is not valid JSON, then it exits 1 saying so and imports nothing', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['import', cli.file('broken.json', `{ "pets": [${VALID_PET},`)])
    assert.equal(res.code, 1)
    assert.equal(res.stdout, '')
    assert.match(res.stderr, /^petstore: import rejected, nothing was imported: the file is not valid JSON/)
    await inspectStore(cli.db, async (store) => assert.equal(await store.catalog.countPets(), 0))
  })

  const invalidUtf8: Array<[string, number[]]> = [
    ['a lone continuation byte', [0x80]],
    ['a truncated two-byte sequence', [0xC3, 0x22]],
    ['an overlong encoding of "/"', [0xC0, 0xAF]],
    ['an encoded surrogate', [0xED, 0xA0, 0x80]],
    ['a code point above U+10FFFF', [0xF4, 0x90, 0x80, 0x80]],
    ['the byte 0xFF', [0xFF]]
  ]
  for (const [what, bytes] of invalidUtf8) {
    test(`when a name holds ${what}, then it exits 1 naming the byte, line and column, and imports nothing`, async (t) => {
      const cli = cliFor(t)
      const head = Buffer.from(`{ "pets": [\n${VALID_PET},\n{ "id": 2, "name": "T`)
      const file = Buffer.concat([head, Buffer.from(bytes), Buffer.from('m", "status": "available" }\n] }\n')])
      const res = await cli.run(['import', cli.file('latin1.json', file)])
      assert.equal(res.code, 1, res.stderr)
      const column = head.length - head.lastIndexOf(0x0A)
      assert.equal(res.stderr, `petstore: import rejected, nothing was imported: the file is not valid UTF-8 at byte ${head.length} (line 3, column ${column})\n`)
      await inspectStore(cli.db, async (store) => assert.equal(await store.catalog.countPets(), 0))
    })
  }

  test('when a large file has invalid UTF-8 far from the start, then its place is named exactly', async (t) => {
    const cli = cliFor(t)
    const text = manyPets(20_000, (i) => i === 15_000 ? '{"id":999999,"name":"Caf\u00e9","status":"available"}' : undefined)
    // Replace the UTF-8 "é" (0xC3 0xA9) by its Latin-1 byte (0xE9) alone.
    const utf8 = Buffer.from(text)
    const at = utf8.indexOf(Buffer.from('Caf\u00e9')) + 3
    const file = Buffer.concat([utf8.subarray(0, at), Buffer.from([0xE9]), utf8.subarray(at + 2)])
    const res = await cli.run(['import', cli.file('big.json', file)])
    assert.equal(res.code, 1)
    assert.match(res.stderr, new RegExp(`not valid UTF-8 at byte ${at} \\(line 15002, column \\d+\\)`))
  })

  test('when multi-byte characters are split across read chunks, then the file is valid and imported', async (t) => {
    const cli = cliFor(t)
    // Enough 2-, 3- and 4-byte characters that some straddle the 64 KiB read chunks.
    const res = await cli.run(['import', cli.file('unicode.json', manyPets(3000, (i) => `{"id":${i + 1},"name":"Ünïcödé 🐕 ${'€'.repeat(i % 30)}","status":"available"}`))])
    assert.equal(res.code, 0, res.stderr)
    await inspectStore(cli.db, async (store) => assert.equal((await store.catalog.getPet(2999n))?.name, `Ünïcödé 🐕 ${'€'.repeat(2998 % 30)}`))
  })

  test('when a JSON object repeats a key, then it exits 1 instead of silently keeping one value', async (t) => {
    const cli = cliFor(t)
    const res = await cli.run(['import', cli.file('dup.json', '{ "pets": [{ "id": 1, "id": 2, "name": "Rex", "status": "available" }] }')])
    assert.equal(res.code, 1)
    assert.match(res.stderr, /nothing was imported/)
  })

  test('when no file or two files are given, then it exits 2', async (t) => {
    const cli = cliFor(t)
    for (const args of [['import'], ['import', 'a.json', 'b.json']]) {
      const res = await cli.run(args)
      assert.equal(res.code, 2, args.join(' '))
      assert.match(res.stderr, /expected 1 argument/)
    }
  })
})
