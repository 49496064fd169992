/**
 * SQLite schema, one entry per version. The PostgreSQL store keeps the same numbering. Applied migrations are
 * recorded in schema_migrations; a migration never changes once released.
 */
export const MIGRATIONS: ReadonlyArray<{ version: number, name: string, sql: string }> = [
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
    // (pet_id, id) would add one random page per change to every group commit (BENCHMARKS.md).
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
  }
]
