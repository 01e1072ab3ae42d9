// What `mirror doctor` asks Postgres, on a connection of its own (it must work when nothing else
// does): the server's version and clock, the migrations applied, the registered client, a few
// sealed account tokens. Each answer is a value; judging it is the doctor's.
import pg from 'pg';

interface AppliedMigration {
  migration_name: string;
  checksum: string;
  finished_at: Date | null;
  rolled_back_at: Date | null;
}

export class DiagnosticConnection {
  private constructor(private readonly client: pg.Client) {}

  /** Connects, or throws pg's error (the doctor turns it into advice). */
  static async open(databaseUrl: string, timeoutMs: number): Promise<DiagnosticConnection> {
    const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: timeoutMs });
    try {
      await client.connect();
    } catch (error) {
      await client.end().catch(() => undefined);
      throw error;
    }
    return new DiagnosticConnection(client);
  }

  async serverClock(): Promise<{ version: string; now: Date }> {
    const { rows } = await this.client.query<{ version: string; now: Date }>(`SELECT current_setting('server_version') AS version, clock_timestamp() AS now`);
    return rows[0]!;
  }

  /** The rows of `_prisma_migrations`; undefined when the table does not exist (nothing applied). */
  async appliedMigrations(): Promise<AppliedMigration[] | undefined> {
    const table = await this.client.query<{ t: string | null }>(`SELECT to_regclass('_prisma_migrations')::text AS t`);
    if (!table.rows[0]?.t) return undefined;
    const { rows } = await this.client.query<AppliedMigration>(`SELECT migration_name, checksum, finished_at, rolled_back_at FROM _prisma_migrations`);
    return rows;
  }

  /** The stored digest of a client's secret; undefined when the client is not registered. */
  async clientSecretHash(clientId: string): Promise<string | undefined> {
    const { rows } = await this.client.query<{ secret_hash: string }>('SELECT secret_hash FROM api_clients WHERE client_id = $1', [clientId]);
    return rows[0]?.secret_hash;
  }

  /** The oldest `limit` linked accounts with their sealed tokens. */
  async linkedAccountTokens(limit: number): Promise<{ id: string; token_ciphertext: Buffer }[]> {
    const { rows } = await this.client.query<{ id: string; token_ciphertext: Buffer }>(
      `SELECT id, token_ciphertext FROM linked_accounts WHERE status = 'linked' ORDER BY created_at LIMIT $1`,
      [limit],
    );
    return rows;
  }

  async close(): Promise<void> {
    await this.client.end();
  }
}
