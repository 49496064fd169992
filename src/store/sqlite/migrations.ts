/**
 * SQLite schema, one entry per version. The PostgreSQL store keeps the same numbering. Applied migrations are
 * recorded in schema_migrations with their checksums; a migration never changes once released (a test pins the
 * checksum of every landed one: test/store/migrations.test.ts). See src/store/migrations.ts.
 */
import type Database from 'better-sqlite3'
import type { Migration, MigrationPlan } from '../migrations.js'

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    sql: `
      CREATE TABLE pets (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('available', 'pending', 'sold')),
        category_id INTEGER,
        category_name TEXT,
        photo_urls TEXT,
        tags TEXT
      );
      CREATE TABLE inventory (
        pet_id INTEGER PRIMARY KEY REFERENCES pets (id),
        quantity INTEGER NOT NULL CHECK (quantity BETWEEN 0 AND 1000000000)
      );
      CREATE TABLE orders (
        id INTEGER PRIMARY KEY,
        pet_id INTEGER NOT NULL,
        quantity INTEGER NOT NULL,
        ship_date TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('placed', 'approved', 'delivered')),
        complete INTEGER NOT NULL CHECK (complete IN (0, 1))
      );
      CREATE INDEX orders_status_id ON orders (status, id);
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        key_hash TEXT NOT NULL UNIQUE,
        name TEXT,
        plan TEXT NOT NULL CHECK (plan IN ('free', 'pro', 'business', 'enterprise')),
        per_minute INTEGER,
        per_day INTEGER,
        created_at TEXT NOT NULL,
        revoked_at TEXT
      );
    `
  },
  {
    version: 2,
    name: 'api key bans',
    sql: `
      ALTER TABLE api_keys ADD COLUMN banned_at TEXT;
      ALTER TABLE api_keys ADD COLUMN banned_until TEXT;
      ALTER TABLE api_keys ADD COLUMN ban_seconds INTEGER;
    `
  },
  {
    version: 3,
    name: 'inventory version',
    // One row counting changes to what GET /inventory shows, bumped in the same transaction as the change:
    // instances compare it to decide whether their serialized inventory is still current.
    sql: `
      CREATE TABLE inventory_version (id INTEGER PRIMARY KEY CHECK (id = 1), v INTEGER NOT NULL);
      INSERT INTO inventory_version (id, v) VALUES (1, 0);
      CREATE TRIGGER inventory_inserted AFTER INSERT ON inventory BEGIN UPDATE inventory_version SET v = v + 1 WHERE id = 1; END;
      CREATE TRIGGER inventory_updated AFTER UPDATE ON inventory BEGIN UPDATE inventory_version SET v = v + 1 WHERE id = 1; END;
      CREATE TRIGGER inventory_deleted AFTER DELETE ON inventory BEGIN UPDATE inventory_version SET v = v + 1 WHERE id = 1; END;
      CREATE TRIGGER pet_status_updated AFTER UPDATE OF status ON pets BEGIN UPDATE inventory_version SET v = v + 1 WHERE id = 1; END;
    `
  },
  {
    version: 4,
    name: 'stock ledger and entry revisions',
    // The revision is the entry's strong ETag: it grows with every change to what the entry shows, a pet's
    // status included. The ledger records every quantity change in the transaction that makes it. A pet's
    // ledger rows are chained (inventory.ledger_head -> previous_id -> ...) instead of indexed by pet: a
    // stock change then appends to the ledger and touches no other page than its entry's, where an index on
    // (pet_id, id) would add one random page per change to every group commit
    // (docs/adr/0012-stock-ledger-in-the-writes-transaction.md).
    sql: `
      ALTER TABLE inventory ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
      ALTER TABLE inventory ADD COLUMN ledger_head INTEGER;
      CREATE TABLE stock_ledger (
        id INTEGER PRIMARY KEY,
        pet_id INTEGER NOT NULL,
        previous_id INTEGER,
        previous_quantity INTEGER,
        quantity INTEGER NOT NULL,
        reason TEXT NOT NULL CHECK (reason IN ('arrival', 'return', 'adjustment', 'import')),
        note TEXT,
        key_id TEXT,
        request_id TEXT,
        created_at TEXT NOT NULL
      );
      CREATE TRIGGER pet_status_revision AFTER UPDATE OF status ON pets WHEN OLD.status IS NOT NEW.status
        BEGIN UPDATE inventory SET revision = revision + 1 WHERE pet_id = NEW.id; END;
    `
  },
  {
    version: 5,
    name: 'converge every landed version 4',
    // Three different migrations 4 landed, and stores ran each: one that dropped the inventory_updated trigger
    // (beaad19, reverted in 84ac106), the ledger with an index on (pet_id, id) (c42d664), and the chained ledger
    // (40ab26a, the one above). This brings any of them to the chained-ledger schema without losing a row: what
    // is missing is added, a ledger without chain links gets them computed from its ids (each pet's previous row
    // is its largest smaller id, which is how the chain is built), and the index is dropped. Each step checks
    // what is there, so on a store that ran the migration above it changes nothing.
    steps: [
      'CREATE TRIGGER IF NOT EXISTS inventory_updated AFTER UPDATE ON inventory BEGIN UPDATE inventory_version SET v = v + 1 WHERE id = 1; END;',
      {
        when: "SELECT count(*) = 0 FROM pragma_table_info('inventory') WHERE name = 'revision'",
        then: 'ALTER TABLE inventory ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;'
      },
      `CREATE TABLE IF NOT EXISTS stock_ledger (
        id INTEGER PRIMARY KEY,
        pet_id INTEGER NOT NULL,
        previous_id INTEGER,
        previous_quantity INTEGER,
        quantity INTEGER NOT NULL,
        reason TEXT NOT NULL CHECK (reason IN ('arrival', 'return', 'adjustment', 'import')),
        note TEXT,
        key_id TEXT,
        request_id TEXT,
        created_at TEXT NOT NULL
      );`,
      {
        when: "SELECT count(*) = 0 FROM pragma_table_info('stock_ledger') WHERE name = 'previous_id'",
        then: `ALTER TABLE stock_ledger ADD COLUMN previous_id INTEGER;
          CREATE INDEX IF NOT EXISTS stock_ledger_pet ON stock_ledger (pet_id, id);
          UPDATE stock_ledger SET previous_id =
            (SELECT max(p.id) FROM stock_ledger p WHERE p.pet_id = stock_ledger.pet_id AND p.id < stock_ledger.id);`
      },
      {
        when: "SELECT count(*) = 0 FROM pragma_table_info('inventory') WHERE name = 'ledger_head'",
        then: `ALTER TABLE inventory ADD COLUMN ledger_head INTEGER;
          CREATE INDEX IF NOT EXISTS stock_ledger_pet ON stock_ledger (pet_id, id);
          UPDATE inventory SET ledger_head = (SELECT max(l.id) FROM stock_ledger l WHERE l.pet_id = inventory.pet_id);`
      },
      `CREATE TRIGGER IF NOT EXISTS pet_status_revision AFTER UPDATE OF status ON pets WHEN OLD.status IS NOT NEW.status
        BEGIN UPDATE inventory SET revision = revision + 1 WHERE pet_id = NEW.id; END;`,
      'DROP INDEX IF EXISTS stock_ledger_pet;'
    ]
  },
  {
    version: 6,
    name: 'the inventory version moves only with a change',
    // Migration 3 bumped the version for every UPDATE OF status on pets, also one that wrote the status a pet
    // already had (a re-import of an unchanged catalogue), and so changed the listing's ETag with nothing changed.
    // Changes to inventory rows fire per row already: a refused change (no row written) never bumps.
    sql: `
      DROP TRIGGER IF EXISTS pet_status_updated;
      CREATE TRIGGER pet_status_updated AFTER UPDATE OF status ON pets WHEN OLD.status IS NOT NEW.status
        BEGIN UPDATE inventory_version SET v = v + 1 WHERE id = 1; END;
    `
  },
  {
    version: 7,
    name: 'idempotency keys and batch ids',
    // One row per idempotency key a write applied with, per API key (scope), written in the write's transaction:
    // the request's fingerprint, the entries the write left (replayed to a retry), and when the row expires.
    // Times are ISO-8601 UTC text of one format, so they compare in time order. The ledger rows of one batch of
    // changes share its batch id.
    sql: `
      ALTER TABLE stock_ledger ADD COLUMN batch_id TEXT;
      CREATE TABLE idempotency_keys (
        scope TEXT NOT NULL,
        idempotency_key TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        entries TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        PRIMARY KEY (scope, idempotency_key)
      );
      CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
    `
  },
  {
    version: 8,
    name: 'key scopes, expiry, rotation and last use',
    // Keys issued before keep full access (scope write) and never expire. quota_id names the key whose rate-limit
    // windows, strikes and bans a rotated key shares (null: its own); replaced_by the key a rotation made. The last
    // use times are recorded at most once a minute per key and server instance.
    sql: `
      ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'write' CHECK (scope IN ('read', 'write'));
      ALTER TABLE api_keys ADD COLUMN expires_at TEXT;
      ALTER TABLE api_keys ADD COLUMN quota_id TEXT;
      ALTER TABLE api_keys ADD COLUMN replaced_by TEXT;
      ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
      ALTER TABLE api_keys ADD COLUMN last_deprecated_use_at TEXT;
      CREATE INDEX api_keys_quota ON api_keys (quota_id) WHERE quota_id IS NOT NULL;
    `
  },
  {
    version: 9,
    name: 'status changes in the stock ledger',
    // What the listing shows is each stock entry with its pet's status, so a change of the status (an import) is a
    // change the feed must show too. status: the status after a change that set it (a changed status, or a new
    // entry); previous_status: the one before, when an existing entry's status changed. Null for every other change
    // (the API changes quantities only) and for the rows written before. No CHECK on them: on a column added by ALTER
    // TABLE it cost every ledger insert (every PATCH) about 5 us, a tenth of the PATCH's statements; only the import
    // writes them, with the domain's statuses.
    sql: `
      ALTER TABLE stock_ledger ADD COLUMN status TEXT;
      ALTER TABLE stock_ledger ADD COLUMN previous_status TEXT;
    `
  },
  {
    version: 10,
    name: 'webhook subscriptions, deliveries and open change streams',
    // webhooks: a quota's subscriptions, each with the feed position up to which its events exist (feed_order,
    // feed_id) and its run of failed attempts. webhook_deliveries: one event of one subscription (a change of the
    // ledger, which stays the outbox: a delivery is made from a committed change, never from a request), its state and
    // next attempt, and the lease of the instance attempting it. webhook_attempts: the deliveries log. event_streams:
    // the change streams open now, each kept alive by its instance (expires_at), counted per quota, ended with its key. Delivery ids are
    // AUTOINCREMENT: never reused, so a late attempt of a deleted delivery cannot land on a newer one.
    sql: `
      CREATE TABLE webhooks (
        id TEXT PRIMARY KEY,
        quota_id TEXT NOT NULL,
        url TEXT NOT NULL,
        events TEXT NOT NULL,
        description TEXT,
        enabled INTEGER NOT NULL DEFAULT 1,
        disabled_reason TEXT,
        secret TEXT NOT NULL,
        previous_secret TEXT,
        previous_secret_until TEXT,
        feed_order INTEGER NOT NULL,
        feed_id INTEGER NOT NULL,
        failures INTEGER NOT NULL DEFAULT 0,
        failing_since TEXT,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
      CREATE INDEX webhooks_quota ON webhooks (quota_id);
      CREATE TABLE webhook_deliveries (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        webhook_id TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
        change_id INTEGER NOT NULL,
        feed_order INTEGER NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts INTEGER NOT NULL DEFAULT 0,
        next_attempt_at TEXT,
        give_up_at TEXT NOT NULL,
        lease_owner TEXT,
        lease_until TEXT,
        created_at TEXT NOT NULL,
        UNIQUE (webhook_id, change_id)
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (webhook_id, next_attempt_at, id) WHERE state = 'pending';
      CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);
      CREATE TABLE webhook_attempts (
        delivery_id INTEGER NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        attempt INTEGER NOT NULL,
        at TEXT NOT NULL,
        status INTEGER,
        error TEXT,
        response TEXT,
        duration_ms INTEGER NOT NULL,
        PRIMARY KEY (delivery_id, attempt)
      );
      CREATE TABLE event_streams (
        id TEXT PRIMARY KEY,
        quota_id TEXT NOT NULL,
        key_id TEXT NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE INDEX event_streams_quota ON event_streams (quota_id, expires_at);
    `
  },
  {
    version: 11,
    name: 'store epochs',
    // The generations of the store's history (src/store/stock/types.ts StoreEpoch): each begins after a place of the feed
    // (after_order, after_id; SQLite's order is always 0), and event ids and cursors of the changes after it carry its
    // random id. A store gets its first one here: after its last change when it has changes (those keep the ids and
    // cursors they were given before, so nothing already sent changes), after nothing when it is new. A copy of the
    // file made by petstore backup or restore is marked, and gets a new one when it is first opened as the store.
    sql: `
      CREATE TABLE store_epochs (
        seq INTEGER PRIMARY KEY,
        epoch TEXT NOT NULL UNIQUE,
        after_order INTEGER NOT NULL,
        after_id INTEGER NOT NULL,
        started_at TEXT NOT NULL,
        reason TEXT NOT NULL
      );
      INSERT INTO store_epochs (seq, epoch, after_order, after_id, started_at, reason)
        SELECT 1, lower(hex(randomblob(8))), 0, coalesce(max(id), 0), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
          CASE WHEN max(id) IS NULL THEN 'created' ELSE 'upgraded' END
        FROM stock_ledger;
    `
  },
  {
    version: 12,
    name: 'selling: holds, orders through the API, shop reasons, low stock, storefront keys',
    // What a shop that sells needs: holding stock for a checkout, orders that touch stock, and alerts.
    // - The ledger becomes the feed of everything that changes what can be sold. A stock change keeps its reason, now
    //   also sale, loss and recount, and may carry a reference (an order, an invoice, a count sheet); a row with an
    //   event (hold.placed, hold.confirmed, hold.released, hold.expired, inventory.low_stock) changes no count (its
    //   quantity is the count as it stands) and has no reason. hold_id names the hold a row is about, held the pet's
    //   units held after it, reorder_point the point a low-stock event crossed. SQLite cannot widen a CHECK in place:
    //   the table is rebuilt, ids, chains and all (a one-time copy of the ledger).
    // - holds and their lines: units of pets held for a checkout or an order until they are confirmed (sold),
    //   released or expire. A line is active while its hold is, with the hold's expiry beside it, so what is held of a
    //   pet at a time is one look in hold_lines_active, whatever the history.
    // - orders: placed through the API as well as imported (source), cancelled as well, with the hold that keeps their
    //   stock; SQLite rebuilds the table for its status CHECK.
    // - stock_alerts: a pet's reorder point and whether it is at or below it since it last crossed it (not on the
    //   inventory row: a change of either must not move the listing's version).
    // - api_keys: the storefront scope (reads, holds and orders, never a count); rebuilt for its CHECK.
    // - idempotency_keys.response: the answer a retry of a hold or order write replays (stock writes keep entries).
    sql: `
      CREATE TABLE stock_ledger_next (
        id INTEGER PRIMARY KEY,
        pet_id INTEGER NOT NULL,
        previous_id INTEGER,
        previous_quantity INTEGER,
        quantity INTEGER NOT NULL,
        reason TEXT CHECK (reason IN ('arrival', 'return', 'adjustment', 'import', 'sale', 'loss', 'recount')),
        note TEXT,
        key_id TEXT,
        request_id TEXT,
        created_at TEXT NOT NULL,
        batch_id TEXT,
        status TEXT,
        previous_status TEXT,
        event TEXT,
        reference TEXT,
        hold_id TEXT,
        held INTEGER,
        reorder_point INTEGER
      );
      INSERT INTO stock_ledger_next (id, pet_id, previous_id, previous_quantity, quantity, reason, note, key_id, request_id, created_at,
          batch_id, status, previous_status)
        SELECT id, pet_id, previous_id, previous_quantity, quantity, reason, note, key_id, request_id, created_at, batch_id, status,
          previous_status
        FROM stock_ledger;
      DROP TABLE stock_ledger;
      ALTER TABLE stock_ledger_next RENAME TO stock_ledger;

      CREATE TABLE holds (
        id TEXT PRIMARY KEY,
        quota_id TEXT NOT NULL,
        key_id TEXT,
        reference TEXT,
        state TEXT NOT NULL CHECK (state IN ('active', 'confirmed', 'released', 'expired')),
        created_at TEXT NOT NULL,
        expires_at TEXT,
        ended_at TEXT,
        order_id INTEGER
      );
      CREATE INDEX holds_quota ON holds (quota_id, created_at, id);
      CREATE INDEX holds_reference ON holds (quota_id, reference) WHERE reference IS NOT NULL;
      CREATE INDEX holds_expiring ON holds (expires_at) WHERE state = 'active';
      CREATE INDEX holds_ended ON holds (ended_at) WHERE state <> 'active';
      CREATE TABLE hold_lines (
        hold_id TEXT NOT NULL REFERENCES holds (id) ON DELETE CASCADE,
        pet_id INTEGER NOT NULL,
        quantity INTEGER NOT NULL CHECK (quantity BETWEEN 1 AND 1000000000),
        active INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
        expires_at TEXT,
        PRIMARY KEY (hold_id, pet_id)
      );
      CREATE INDEX hold_lines_pet ON hold_lines (pet_id, hold_id);
      CREATE INDEX hold_lines_active ON hold_lines (pet_id, expires_at) WHERE active = 1;

      CREATE TABLE orders_next (
        id INTEGER PRIMARY KEY,
        pet_id INTEGER NOT NULL,
        quantity INTEGER NOT NULL,
        ship_date TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('placed', 'approved', 'delivered', 'cancelled')),
        complete INTEGER NOT NULL CHECK (complete IN (0, 1)),
        source TEXT NOT NULL DEFAULT 'import' CHECK (source IN ('import', 'api')),
        quota_id TEXT,
        reference TEXT,
        hold_id TEXT,
        created_at TEXT,
        updated_at TEXT
      );
      INSERT INTO orders_next (id, pet_id, quantity, ship_date, status, complete)
        SELECT id, pet_id, quantity, ship_date, status, complete FROM orders;
      DROP TABLE orders;
      ALTER TABLE orders_next RENAME TO orders;
      CREATE INDEX orders_status_id ON orders (status, id);
      CREATE INDEX orders_reference ON orders (quota_id, reference) WHERE reference IS NOT NULL;

      CREATE TABLE stock_alerts (
        pet_id INTEGER PRIMARY KEY REFERENCES pets (id),
        reorder_point INTEGER NOT NULL CHECK (reorder_point BETWEEN 0 AND 1000000000),
        low INTEGER NOT NULL DEFAULT 0 CHECK (low IN (0, 1))
      );

      CREATE TABLE api_keys_next (
        id TEXT PRIMARY KEY,
        key_hash TEXT NOT NULL UNIQUE,
        name TEXT,
        plan TEXT NOT NULL CHECK (plan IN ('free', 'pro', 'business', 'enterprise')),
        per_minute INTEGER,
        per_day INTEGER,
        created_at TEXT NOT NULL,
        revoked_at TEXT,
        banned_at TEXT,
        banned_until TEXT,
        ban_seconds INTEGER,
        scope TEXT NOT NULL DEFAULT 'write' CHECK (scope IN ('read', 'storefront', 'write')),
        expires_at TEXT,
        quota_id TEXT,
        replaced_by TEXT,
        last_used_at TEXT,
        last_deprecated_use_at TEXT
      );
      INSERT INTO api_keys_next (id, key_hash, name, plan, per_minute, per_day, created_at, revoked_at, banned_at, banned_until,
          ban_seconds, scope, expires_at, quota_id, replaced_by, last_used_at, last_deprecated_use_at)
        SELECT id, key_hash, name, plan, per_minute, per_day, created_at, revoked_at, banned_at, banned_until, ban_seconds, scope,
          expires_at, quota_id, replaced_by, last_used_at, last_deprecated_use_at
        FROM api_keys;
      DROP TABLE api_keys;
      ALTER TABLE api_keys_next RENAME TO api_keys;
      CREATE INDEX api_keys_quota ON api_keys (quota_id) WHERE quota_id IS NOT NULL;

      ALTER TABLE idempotency_keys ADD COLUMN response TEXT;
    `
  },
  {
    version: 13,
    name: 'active holds by quota',
    // A placement counts its quota's active holds and units (the caps) in its transaction. Through holds_quota that
    // read every hold the quota ever placed and has not purged (30 days of checkouts), each placement slower than the
    // last; this index holds the active ones only, as many as the caps allow.
    sql: `
      CREATE INDEX holds_quota_active ON holds (quota_id) WHERE state = 'active';
    `
  }
]

/**
 * This release's migrations and the landed variants of them it converts (migration 5), with their statements as they
 * landed: the schema check replays a store's history, whichever variant it ran.
 */
export const PLAN: MigrationPlan = {
  migrations: MIGRATIONS,
  superseded: [
    {
      // beaad19: the version bump moved into the store's code; reverted by 84ac106.
      version: 4,
      name: 'stock updates bump the inventory version in the store',
      sql: 'DROP TRIGGER inventory_updated;',
      checksum: '52591a9aae7c7b3f8efedf3f5d1608a59ef7616cc0968640170d4f23210c8307',
      convertedBy: 5
    },
    {
      // c42d664: the stock ledger indexed by (pet_id, id); 40ab26a rewrote it in place (the landed edit).
      version: 4,
      name: 'stock ledger and entry revisions',
      sql: `
      ALTER TABLE inventory ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
      CREATE TABLE stock_ledger (
        id INTEGER PRIMARY KEY,
        pet_id INTEGER NOT NULL,
        previous_quantity INTEGER,
        quantity INTEGER NOT NULL,
        reason TEXT NOT NULL CHECK (reason IN ('arrival', 'return', 'adjustment', 'import')),
        note TEXT,
        key_id TEXT,
        request_id TEXT,
        created_at TEXT NOT NULL
      );
      CREATE INDEX stock_ledger_pet ON stock_ledger (pet_id, id);
      CREATE TRIGGER pet_status_revision AFTER UPDATE OF status ON pets WHEN OLD.status IS NOT NEW.status
        BEGIN UPDATE inventory SET revision = revision + 1 WHERE pet_id = NEW.id; END;
    `,
      checksum: 'c8c4b29157603f383bd368777e5d83ad955d45cd09c649f616aafa486987b0bb',
      convertedBy: 5,
      // The same name as the chained ledger above; this one has no chain head on the stock entries.
      detect: "SELECT count(*) = 0 FROM pragma_table_info('inventory') WHERE name = 'ledger_head'"
    }
  ]
}

/**
 * The table recording the applied migrations, as this release creates it; releases before checksums created it
 * without the checksum column, which `migrate` adds (the result is the same table, to the letter).
 */
export const BOOKKEEPING = {
  create: 'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL, checksum TEXT)',
  createBeforeChecksums: 'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
  addChecksum: 'ALTER TABLE schema_migrations ADD COLUMN checksum TEXT'
} as const

/** Runs one migration's statements on `db` (a step with `when` only when its query answers true). */
export function applyMigration (db: Database.Database, migration: Migration): void {
  for (const step of migration.steps ?? [migration.sql ?? '']) {
    if (typeof step === 'string') db.exec(step)
    else if (Number(db.prepare(step.when).pluck().get()) === 1) db.exec(step.then)
  }
}
