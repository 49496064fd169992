/**
 * The change streams open now, registered in the store so that a quota's limit holds across instances. Implemented by
 * both stores; one contract suite (test/store/streams.contract.ts).
 */

/** Every call of the area writes. */
export interface StreamWrites {
  /**
   * Registers an open change stream of a key (`keyId`, of quota `quotaId`) until `expiresAt`, unless the quota has `max`
   * streams open at `at` (counted in the same transaction); false when refused.
   */
  openEventStream (id: string, quotaId: string, keyId: string, expiresAt: Date, at: Date, max: number): Promise<boolean>
  /** Keeps open streams registered until `expiresAt` (ids no longer registered are ignored). */
  renewEventStreams (ids: readonly string[], expiresAt: Date): Promise<void>
  closeEventStream (id: string): Promise<void>
}

export type StreamStore = StreamWrites

/** What a store serving reads only does with each write of the area (src/store/read-only.ts): refuse it. */
export const STREAM_WRITES = {
  openEventStream: 'refuse',
  renewEventStreams: 'refuse',
  closeEventStream: 'refuse'
} as const satisfies Record<keyof StreamWrites, 'refuse' | 'skip'>
