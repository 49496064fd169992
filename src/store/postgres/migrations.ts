/**
 * PostgreSQL schema, with the same version numbers as the SQLite migrations (src/store/sqlite/migrations.ts).
 * int64 ids are bigint; timestamps of keys are timestamptz; shipDate stays text so it round-trips exactly.
 * Released migrations never change (their checksums are pinned by test/store/migrations.test.ts).
 */
import type { Migration, MigrationPlan } from '../migrations.js'

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'initial schema',
    sql: `
      CREATE TABLE pets (
        id bigint PRIMARY KEY,
        name text NOT NULL,
        status text NOT NULL CHECK (status IN ('available', 'pending', 'sold')),
        category_id bigint,
        category_name text,
        photo_urls text,
        tags text
      );
      CREATE TABLE inventory (
        pet_id bigint PRIMARY KEY REFERENCES pets (id),
        quantity integer NOT NULL CHECK (quantity BETWEEN 0 AND 1000000000)
      );
      CREATE TABLE orders (
        id bigint PRIMARY KEY,
        pet_id bigint NOT NULL,
        quantity integer NOT NULL,
        ship_date text NOT NULL,
        status text NOT NULL CHECK (status IN ('placed', 'approved', 'delivered')),
        complete boolean NOT NULL
      );
      CREATE INDEX orders_status_id ON orders (status, id);
      CREATE TABLE api_keys (
        id text PRIMARY KEY,
        key_hash text NOT NULL UNIQUE,
        name text,
        plan text NOT NULL CHECK (plan IN ('free', 'pro', 'business', 'enterprise')),
        per_minute integer,
        per_day integer,
        created_at timestamptz NOT NULL,
        revoked_at timestamptz
      );
    `
  },
  {
    version: 2,
    name: 'api key bans',
    sql: `
      ALTER TABLE api_keys ADD COLUMN banned_at timestamptz;
      ALTER TABLE api_keys ADD COLUMN banned_until timestamptz;
      ALTER TABLE api_keys ADD COLUMN ban_seconds integer;
    `
  },
  {
    version: 3,
    name: 'inventory version',
    // See the SQLite migration; statement-level triggers bump once per statement, however many rows it touched.
    sql: `
      CREATE TABLE inventory_version (id integer PRIMARY KEY CHECK (id = 1), v bigint NOT NULL);
      INSERT INTO inventory_version (id, v) VALUES (1, 0);
      CREATE FUNCTION bump_inventory_version() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          UPDATE inventory_version SET v = v + 1 WHERE id = 1;
          RETURN NULL;
        END
      $$;
      CREATE TRIGGER inventory_changed AFTER INSERT OR UPDATE OR DELETE ON inventory
        FOR EACH STATEMENT EXECUTE FUNCTION bump_inventory_version();
      CREATE TRIGGER pet_status_changed AFTER UPDATE OF status ON pets
        FOR EACH STATEMENT EXECUTE FUNCTION bump_inventory_version();
    `
  },
  {
    version: 4,
    name: 'stock ledger and entry revisions',
    // See the SQLite migration. Ledger ids come from an identity; per pet they follow commit order, because a
    // change holds the entry's row lock until it commits.
    sql: `
      ALTER TABLE inventory ADD COLUMN revision bigint NOT NULL DEFAULT 1;
      CREATE TABLE stock_ledger (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        pet_id bigint NOT NULL,
        previous_quantity integer,
        quantity integer NOT NULL,
        reason text NOT NULL CHECK (reason IN ('arrival', 'return', 'adjustment', 'import')),
        note text,
        key_id text,
        request_id text,
        created_at timestamptz NOT NULL
      );
      CREATE INDEX stock_ledger_pet ON stock_ledger (pet_id, id);
      CREATE FUNCTION bump_stock_revision() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          UPDATE inventory SET revision = revision + 1 WHERE pet_id = NEW.id;
          RETURN NULL;
        END
      $$;
      CREATE TRIGGER pet_status_revision AFTER UPDATE OF status ON pets
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION bump_stock_revision();
    `
  },
  {
    version: 5,
    name: 'converge every landed version 4',
    // Two migrations 4 landed: a no-op (beaad19, reverted in 84ac106) and the ledger above. A store that ran the
    // no-op has neither ledger nor revisions; this adds them. On a store that ran the ledger it changes nothing
    // (every statement checks or replaces what is there).
    sql: `
      ALTER TABLE inventory ADD COLUMN IF NOT EXISTS revision bigint NOT NULL DEFAULT 1;
      CREATE TABLE IF NOT EXISTS stock_ledger (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        pet_id bigint NOT NULL,
        previous_quantity integer,
        quantity integer NOT NULL,
        reason text NOT NULL CHECK (reason IN ('arrival', 'return', 'adjustment', 'import')),
        note text,
        key_id text,
        request_id text,
        created_at timestamptz NOT NULL
      );
      CREATE INDEX IF NOT EXISTS stock_ledger_pet ON stock_ledger (pet_id, id);
      CREATE OR REPLACE FUNCTION bump_stock_revision() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          UPDATE inventory SET revision = revision + 1 WHERE pet_id = NEW.id;
          RETURN NULL;
        END
      $$;
      DROP TRIGGER IF EXISTS pet_status_revision ON pets;
      CREATE TRIGGER pet_status_revision AFTER UPDATE OF status ON pets
        FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION bump_stock_revision();
    `
  },
  {
    version: 6,
    name: 'the inventory version moves only with a change',
    // Migration 3's statement-level triggers bumped the version once per statement, also for a statement that
    // wrote no row (a refused change: stale If-Match, out of range, unknown pet) or wrote a status a pet already
    // had, and so changed the listing's ETag with nothing changed. They now look at the statement's transition
    // tables (one trigger per event: a trigger with transition tables has one event) and bump once, only when a
    // row changed.
    sql: `
      DROP TRIGGER IF EXISTS inventory_changed ON inventory;
      DROP TRIGGER IF EXISTS pet_status_changed ON pets;
      CREATE FUNCTION bump_inventory_version_if_rows() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF EXISTS (SELECT 1 FROM changed_rows) THEN
            UPDATE inventory_version SET v = v + 1 WHERE id = 1;
          END IF;
          RETURN NULL;
        END
      $$;
      CREATE TRIGGER inventory_inserted AFTER INSERT ON inventory REFERENCING NEW TABLE AS changed_rows
        FOR EACH STATEMENT EXECUTE FUNCTION bump_inventory_version_if_rows();
      CREATE TRIGGER inventory_updated AFTER UPDATE ON inventory REFERENCING NEW TABLE AS changed_rows
        FOR EACH STATEMENT EXECUTE FUNCTION bump_inventory_version_if_rows();
      CREATE TRIGGER inventory_deleted AFTER DELETE ON inventory REFERENCING OLD TABLE AS changed_rows
        FOR EACH STATEMENT EXECUTE FUNCTION bump_inventory_version_if_rows();
      CREATE FUNCTION bump_inventory_version_if_status() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF EXISTS (SELECT 1 FROM old_pets o JOIN new_pets n ON n.id = o.id WHERE o.status IS DISTINCT FROM n.status) THEN
            UPDATE inventory_version SET v = v + 1 WHERE id = 1;
          END IF;
          RETURN NULL;
        END
      $$;
      CREATE TRIGGER pet_status_changed AFTER UPDATE ON pets REFERENCING OLD TABLE AS old_pets NEW TABLE AS new_pets
        FOR EACH STATEMENT EXECUTE FUNCTION bump_inventory_version_if_status();
    `
  },
  {
    version: 7,
    name: 'idempotency keys and batch ids',
    // See the SQLite migration. The primary key is what makes a key apply once across instances: a second
    // instance inserting the same key waits for the first one's transaction and then fails with a unique violation.
    //
    // The change feed's order is the order of commits. Identity values become visible out of order, and
    // transaction ids are taken at a transaction's first write, not at its commit, so neither orders the feed. Each
    // ledger row records its transaction (txid); when a transaction that wrote ledger rows commits, a deferred
    // trigger takes the next feed position for it from feed_clock, whose row lock it then holds until the commit has
    // completed (locks are released after a commit becomes visible). So positions are handed out in commit order,
    // a transaction that rolls back gives its position back, and a reader that sees position p sees every position
    // below it: paging by (position, id) never misses a change, never repeats one, and shows each pet's changes in
    // the order they were made. The cost is one short wait per committing writer
    // (docs/adr/0013-change-feed-in-commit-order.md). Rows written
    // before this migration get its own transaction's id and position 1: they come first.
    sql: `
      ALTER TABLE stock_ledger ADD COLUMN batch_id text;
      ALTER TABLE stock_ledger ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
      CREATE INDEX stock_ledger_feed ON stock_ledger (txid, id);
      CREATE TABLE feed_clock (id integer PRIMARY KEY CHECK (id = 1), position bigint NOT NULL);
      INSERT INTO feed_clock (id, position) VALUES (1, 1);
      CREATE TABLE feed_positions (txid xid8 PRIMARY KEY, position bigint NOT NULL UNIQUE);
      INSERT INTO feed_positions (txid, position) VALUES (pg_current_xact_id(), 1);
      CREATE FUNCTION take_feed_position() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
          IF NOT EXISTS (SELECT 1 FROM feed_positions WHERE txid = pg_current_xact_id()) THEN
            WITH next AS (UPDATE feed_clock SET position = position + 1 WHERE id = 1 RETURNING position)
            INSERT INTO feed_positions (txid, position) SELECT pg_current_xact_id(), position FROM next;
          END IF;
          RETURN NULL;
        END
      $$;
      CREATE CONSTRAINT TRIGGER stock_ledger_feed_position AFTER INSERT ON stock_ledger
        DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION take_feed_position();
      CREATE TABLE idempotency_keys (
        scope text NOT NULL,
        idempotency_key text NOT NULL,
        fingerprint text NOT NULL,
        entries text NOT NULL,
        created_at timestamptz NOT NULL,
        expires_at timestamptz NOT NULL,
        PRIMARY KEY (scope, idempotency_key)
      );
      CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
    `
  },
  {
    version: 8,
    name: 'key scopes, expiry, rotation and last use',
    // See the SQLite migration.
    sql: `
      ALTER TABLE api_keys ADD COLUMN scope text NOT NULL DEFAULT 'write' CHECK (scope IN ('read', 'write'));
      ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
      ALTER TABLE api_keys ADD COLUMN quota_id text;
      ALTER TABLE api_keys ADD COLUMN replaced_by text;
      ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;
      ALTER TABLE api_keys ADD COLUMN last_deprecated_use_at timestamptz;
      CREATE INDEX api_keys_quota ON api_keys (quota_id) WHERE quota_id IS NOT NULL;
    `
  },
  {
    version: 9,
    name: 'status changes in the stock ledger',
    // See the SQLite migration. The checks are NOT VALID: every existing row holds null, and validating would scan the
    // whole ledger under the ALTER's exclusive lock; new rows are checked all the same.
    sql: `
      ALTER TABLE stock_ledger ADD COLUMN status text, ADD COLUMN previous_status text;
      ALTER TABLE stock_ledger ADD CONSTRAINT stock_ledger_status_check
        CHECK (status IN ('available', 'pending', 'sold') AND previous_status IN ('available', 'pending', 'sold')) NOT VALID;
    `
  },
  {
    version: 10,
    name: 'webhook subscriptions, deliveries and open change streams',
    // See the SQLite migration.
    sql: `
      CREATE TABLE webhooks (
        id text PRIMARY KEY,
        quota_id text NOT NULL,
        url text NOT NULL,
        events text NOT NULL,
        description text,
        enabled boolean NOT NULL DEFAULT true,
        disabled_reason text,
        secret text NOT NULL,
        previous_secret text,
        previous_secret_until timestamptz,
        feed_order bigint NOT NULL,
        feed_id bigint NOT NULL,
        failures integer NOT NULL DEFAULT 0,
        failing_since timestamptz,
        created_at timestamptz NOT NULL,
        updated_at timestamptz NOT NULL
      );
      CREATE INDEX webhooks_quota ON webhooks (quota_id);
      CREATE TABLE webhook_deliveries (
        id bigserial PRIMARY KEY,
        webhook_id text NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
        change_id bigint NOT NULL,
        feed_order bigint NOT NULL,
        state text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
        attempts integer NOT NULL DEFAULT 0,
        next_attempt_at timestamptz,
        give_up_at timestamptz NOT NULL,
        lease_owner text,
        lease_until timestamptz,
        created_at timestamptz NOT NULL,
        UNIQUE (webhook_id, change_id)
      );
      CREATE INDEX webhook_deliveries_due ON webhook_deliveries (webhook_id, next_attempt_at, id) WHERE state = 'pending';
      CREATE INDEX webhook_deliveries_created ON webhook_deliveries (created_at);
      CREATE TABLE webhook_attempts (
        delivery_id bigint NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
        attempt integer NOT NULL,
        at timestamptz NOT NULL,
        status integer,
        error text,
        response text,
        duration_ms integer NOT NULL,
        PRIMARY KEY (delivery_id, attempt)
      );
      CREATE TABLE event_streams (
        id text PRIMARY KEY,
        quota_id text NOT NULL,
        key_id text NOT NULL,
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX event_streams_quota ON event_streams (quota_id, expires_at);
    `
  },
  {
    version: 11,
    name: 'store epochs',
    // See the SQLite migration. The first epoch begins after the feed's head (the highest commit position, the last
    // ledger row of its transaction). Each epoch also records what identifies the database it began on (the cluster's
    // system identifier, the database's oid, the oid of this table, the WAL timeline), filled in by the store when it
    // confirms the epoch (src/store/schema/postgres.ts confirmEpoch), which starts a new epoch when they differ: a
    // restore into another database or cluster, or with pg_restore --clean into the same one, point-in-time recovery.
    //
    // A promoted replica goes on serving the instances that were connected to its primary, which confirm nothing:
    // the commit trigger of the feed (migration 7) now also compares the WAL timeline it takes a position on with the
    // one recorded in feed_clock.timeline (null until confirmed, or where the timeline cannot be read: no check), and
    // the first commit on a new timeline starts a new epoch, after the last position taken before it, in its own
    // transaction, under the feed clock's lock. So no change of the new timeline ever takes the id or cursor of one
    // the old primary made and the replica never received. The check costs each writing transaction one reading of
    // the current WAL position.
    sql: `
      CREATE TABLE store_epochs (
        seq integer PRIMARY KEY,
        epoch text NOT NULL UNIQUE,
        after_order bigint NOT NULL,
        after_id bigint NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        reason text NOT NULL,
        system_identifier text,
        database_oid bigint,
        table_oid bigint,
        timeline bigint
      );
      INSERT INTO store_epochs (seq, epoch, after_order, after_id, reason)
        SELECT 1, substr(md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text), 1, 16),
          coalesce(h.position, 0), coalesce(h.id, 0), CASE WHEN h.id IS NULL THEN 'created' ELSE 'upgraded' END
        FROM (SELECT 1) one LEFT JOIN (
          SELECT f.position, (SELECT max(l.id) FROM stock_ledger l WHERE l.txid = f.txid) AS id FROM feed_positions f ORDER BY f.position DESC LIMIT 1
        ) h ON true;
      ALTER TABLE feed_clock ADD COLUMN timeline bigint;
      CREATE OR REPLACE FUNCTION take_feed_position() RETURNS trigger LANGUAGE plpgsql AS $$
        DECLARE
          taken bigint;
          recorded bigint;
          line bigint;
        BEGIN
          IF NOT EXISTS (SELECT 1 FROM feed_positions WHERE txid = pg_current_xact_id()) THEN
            UPDATE feed_clock SET position = position + 1 WHERE id = 1 RETURNING position, timeline INTO taken, recorded;
            IF recorded IS NOT NULL THEN
              line := ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint;
              IF line <> recorded THEN
                INSERT INTO store_epochs (seq, epoch, after_order, after_id, reason, database_oid, timeline)
                  SELECT max(seq) + 1, substr(md5(random()::text || clock_timestamp()::text || pg_backend_pid()::text), 1, 16),
                    taken - 1, 9223372036854775807, 'new timeline', (SELECT oid FROM pg_database WHERE datname = current_database()), line
                  FROM store_epochs;
                UPDATE feed_clock SET timeline = line WHERE id = 1;
              END IF;
            END IF;
            INSERT INTO feed_positions (txid, position) VALUES (pg_current_xact_id(), taken);
          END IF;
          RETURN NULL;
        END
      $$;
    `
  },
  {
    version: 12,
    name: 'selling: holds, orders through the API, shop reasons, low stock, storefront keys',
    // See the SQLite migration. PostgreSQL widens its CHECKs in place: the new ones are NOT VALID (every existing row
    // holds what the old ones allowed, and validating would scan the ledger), and the ledger's reason may now be null
    // (an event that changes no count). A hold's placement locks the inventory rows of its pets (FOR UPDATE, in pet
    // order), so holds and stock writes of one pet take turns on every instance.
    sql: `
      ALTER TABLE stock_ledger DROP CONSTRAINT stock_ledger_reason_check;
      ALTER TABLE stock_ledger ALTER COLUMN reason DROP NOT NULL;
      ALTER TABLE stock_ledger ADD CONSTRAINT stock_ledger_reason_check
        CHECK (reason IN ('arrival', 'return', 'adjustment', 'import', 'sale', 'loss', 'recount')) NOT VALID;
      ALTER TABLE stock_ledger ADD COLUMN event text;
      ALTER TABLE stock_ledger ADD COLUMN reference text;
      ALTER TABLE stock_ledger ADD COLUMN hold_id text;
      ALTER TABLE stock_ledger ADD COLUMN held integer;
      ALTER TABLE stock_ledger ADD COLUMN reorder_point integer;

      CREATE TABLE holds (
        id text PRIMARY KEY,
        quota_id text NOT NULL,
        key_id text,
        reference text,
        state text NOT NULL CHECK (state IN ('active', 'confirmed', 'released', 'expired')),
        created_at timestamptz NOT NULL,
        expires_at timestamptz,
        ended_at timestamptz,
        order_id bigint
      );
      CREATE INDEX holds_quota ON holds (quota_id, created_at, id);
      CREATE INDEX holds_reference ON holds (quota_id, reference) WHERE reference IS NOT NULL;
      CREATE INDEX holds_expiring ON holds (expires_at) WHERE state = 'active';
      CREATE INDEX holds_ended ON holds (ended_at) WHERE state <> 'active';
      CREATE TABLE hold_lines (
        hold_id text NOT NULL REFERENCES holds (id) ON DELETE CASCADE,
        pet_id bigint NOT NULL,
        quantity integer NOT NULL CHECK (quantity BETWEEN 1 AND 1000000000),
        active boolean NOT NULL DEFAULT true,
        expires_at timestamptz,
        PRIMARY KEY (hold_id, pet_id)
      );
      CREATE INDEX hold_lines_pet ON hold_lines (pet_id, hold_id);
      CREATE INDEX hold_lines_active ON hold_lines (pet_id, expires_at) WHERE active;

      ALTER TABLE orders DROP CONSTRAINT orders_status_check;
      ALTER TABLE orders ADD CONSTRAINT orders_status_check CHECK (status IN ('placed', 'approved', 'delivered', 'cancelled')) NOT VALID;
      ALTER TABLE orders ADD COLUMN source text NOT NULL DEFAULT 'import' CHECK (source IN ('import', 'api'));
      ALTER TABLE orders ADD COLUMN quota_id text;
      ALTER TABLE orders ADD COLUMN reference text;
      ALTER TABLE orders ADD COLUMN hold_id text;
      ALTER TABLE orders ADD COLUMN created_at timestamptz;
      ALTER TABLE orders ADD COLUMN updated_at timestamptz;
      CREATE INDEX orders_reference ON orders (quota_id, reference) WHERE reference IS NOT NULL;

      CREATE TABLE stock_alerts (
        pet_id bigint PRIMARY KEY REFERENCES pets (id),
        reorder_point integer NOT NULL CHECK (reorder_point BETWEEN 0 AND 1000000000),
        low boolean NOT NULL DEFAULT false
      );

      ALTER TABLE api_keys DROP CONSTRAINT api_keys_scope_check;
      ALTER TABLE api_keys ADD CONSTRAINT api_keys_scope_check CHECK (scope IN ('read', 'storefront', 'write')) NOT VALID;

      ALTER TABLE idempotency_keys ADD COLUMN response text;
    `
  },
  {
    version: 13,
    name: 'active holds by quota',
    // See the SQLite migration.
    sql: `
      CREATE INDEX holds_quota_active ON holds (quota_id) WHERE state = 'active';
    `
  }
]

/** This release's migrations and the landed variant of version 4 it converts (migration 5). */
export const PLAN: MigrationPlan = {
  migrations: MIGRATIONS,
  superseded: [
    {
      // beaad19: a placeholder keeping the numbering; reverted by 84ac106.
      version: 4,
      name: 'stock updates bump the inventory version in the store',
      sql: 'SELECT 1;',
      checksum: '7aae1c3890bc533bc9b0e2d4243e27cf9013f473bf295f042a8cb0d515a5befe',
      convertedBy: 5
    }
  ]
}

/**
 * The table recording the applied migrations, as this release creates it; releases before checksums created it
 * without the checksum column, which `migrate` adds.
 */
export const BOOKKEEPING = {
  create: 'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL, checksum text)',
  createBeforeChecksums: 'CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL)',
  addChecksum: 'ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS checksum text'
} as const
