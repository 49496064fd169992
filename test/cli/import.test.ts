import assert from 'node:assert/strict'
import { fileURLToPath } from 'node:url'
import { describe, test } from 'node:test'
import type { SqliteStore } from '../../src/store/sqlite/index.js'
import { cliFor, inspectStore } from './run.js'

const DEMO = fileURLToPath(new URL('../../data/demo.json', import.meta.url))
const BIG = 9007199254740993n // 2^53 + 1: a double cannot hold it
const INT64_MAX = 9223372036854775807n
const INT64_MIN = -9223372036854775808n

const VALID_PET = '{ "id": 1, "name": "Rex", "status": "available", "quantity": 3 }'
const VALID_ORDER = '{ "id": 1, "petId": 1, "quantity": 1, "shipDate": "2026-11-20T10:00:00Z", "status": "placed", "complete": false }'

async function contents (store: SqliteStore) {
  return {
    pets: await store.countPets(),
    inventory: await store.listInventory(),
    orders: (await store.listOrders({ afterId: null, limit: 1000, status: null })).orders
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
      assert.deepEqual(await store.getPet(BIG), {
        id: BIG, name: 'Big Id', status: 'available', tags: [{ id: INT64_MAX, name: 'int64-max' }]
      })
      assert.equal(await store.getPet(BIG - 1n), null, 'not rounded to 2^53')
      assert.deepEqual(orders.at(-1), {
        id: BIG, petId: BIG, quantity: 1, shipDate: '2026-11-22T12:00:00Z', status: 'placed', complete: false
      })
      assert.deepEqual(await store.getPet(1n), {
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
      assert.deepEqual((await store.getPet(INT64_MAX))?.category, { id: INT64_MIN, name: 'min' })
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
      assert.equal(await store.countPets(), 1)
      assert.deepEqual(await store.listInventory(), [])
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
      assert.deepEqual(await store.getPet(1n), { id: 1n, name: 'Rex the Second', status: 'pending' })
      assert.deepEqual(inventory, [
        { petId: 1n, quantity: 9, status: 'pending' },
        { petId: 2n, quantity: 1, status: 'available' }
      ])
      assert.deepEqual(orders, [
        { id: 1n, petId: 2n, quantity: 4, shipDate: '2026-12-01T08:00:00Z', status: 'delivered', complete: true }
      ])
    })
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
      field: /pets\[1\]\.name must be a non-empty string/
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
      field: /pets\[1\]\.quantity must be an integer from 0 to 1000000000/
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
    await inspectStore(cli.db, async (store) => assert.equal((await store.getPet(1n))?.name, 'Rex'))
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
    await inspectStore(cli.db, async (store) => assert.equal(await store.countPets(), 0))
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
