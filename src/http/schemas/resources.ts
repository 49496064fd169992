import { Type, type Static } from 'typebox'
import { MAX_ORDER_QUANTITY, MAX_QUANTITY, ORDER_STATUSES, PET_STATUSES } from '../../domain/model.js'
import { Int64 } from './common.js'

export const PetStatus = Type.Enum(PET_STATUSES, { type: 'string', description: 'Status of the pet' })
export const OrderStatus = Type.Enum(ORDER_STATUSES, { type: 'string', description: 'Status of the order' })

export const InventoryItem = Type.Object({
  petId: Type.Unsafe<bigint>({ ...Int64, description: 'Identifier of the animal the entry tracks' }),
  quantity: Type.Integer({ minimum: 0, maximum: MAX_QUANTITY, description: 'Current stock count' }),
  status: PetStatus
}, { additionalProperties: false, description: 'The stock entry of one pet' })

export const InventoryUpdate = Type.Object({
  quantity: Type.Integer({ minimum: 0, maximum: MAX_QUANTITY, description: 'The new stock count, 0 to 1,000,000,000' })
}, { additionalProperties: false, description: 'Sets the stock quantity of one pet' })
export type InventoryUpdate = Static<typeof InventoryUpdate>

const IdName = (what: string) => Type.Object({
  id: Int64,
  name: Type.String()
}, { additionalProperties: false, description: what })

export const Pet = Type.Object({
  id: Int64,
  name: Type.String({ examples: ['doggie'] }),
  status: PetStatus,
  category: Type.Optional(IdName('The category of the pet')),
  tags: Type.Optional(Type.Array(IdName('A tag'))),
  photoUrls: Type.Optional(Type.Array(Type.String()))
}, { additionalProperties: false, description: 'A pet (classic Petstore fields)' })

export const Order = Type.Object({
  id: Int64,
  petId: Int64,
  quantity: Type.Integer({ minimum: 1, maximum: MAX_ORDER_QUANTITY }),
  shipDate: Type.String({ format: 'date-time' }),
  status: OrderStatus,
  complete: Type.Boolean()
}, { additionalProperties: false, description: 'A store order' })
