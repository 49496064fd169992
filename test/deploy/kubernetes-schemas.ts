/**
 * Checks rendered Kubernetes objects the way the API server checks what `kubectl apply` sends: against the schema of
 * their kind, from kubernetes-models (types, required fields, formats), and for fields the API does not know. Those
 * schemas leave objects open, so a misspelled field (`readinesProbe`) passes them, and a cluster would refuse it
 * (strict field validation) or, an older one, drop it without a word. The known fields are read from the package's
 * TypeScript declarations, which are generated from the same OpenAPI document as its schemas.
 */
import { fileURLToPath } from 'node:url'
import ts from 'typescript'

/** What every object kubectl renders has; the rest is checked against its kind's schema. */
export interface KubernetesObject {
  apiVersion: string
  kind: string
  metadata: { name: string, labels?: Record<string, string>, [field: string]: unknown }
  [field: string]: unknown
}

interface Model {
  validate: () => void
}
type ModelClass = new (data: unknown) => Model

/** `apps/v1` + `Deployment` -> `kubernetes-models/apps/v1/Deployment`; the core group is `v1` alone. */
function modulePath ({ apiVersion, kind }: KubernetesObject): string {
  return `kubernetes-models/${apiVersion}/${kind}`
}

/**
 * kustomize v5 wraps the base64 of long Secret values at 76 columns. The API server's decoder (Go's encoding/base64)
 * skips line breaks; the schema's `byte` format does not, so they are taken out before it looks.
 */
function asDecoded (object: KubernetesObject): KubernetesObject {
  const unwrap = (data: unknown): unknown => data === null || typeof data !== 'object'
    ? data
    : Object.fromEntries(Object.entries(data).map(([key, value]) => [key, typeof value === 'string' ? value.replace(/[\r\n]/g, '') : value]))
  const field = object.apiVersion !== 'v1' ? undefined : object.kind === 'Secret' ? 'data' : object.kind === 'ConfigMap' ? 'binaryData' : undefined
  return field === undefined || object[field] === undefined ? object : { ...object, [field]: unwrap(object[field]) }
}

export class KubernetesSchemas {
  private constructor (
    private readonly models: ReadonlyMap<string, ModelClass>,
    private readonly checker: ts.TypeChecker,
    private readonly declarations: ReadonlyMap<string, ts.Type>
  ) {}

  /**
   * Loads the schema of every kind among `objects`. A kind kubernetes-models does not have (a custom resource, a
   * misspelled kind or apiVersion) gets none, and problems() reports it: nothing could be checked about it.
   */
  static async load (objects: readonly KubernetesObject[]): Promise<KubernetesSchemas> {
    const paths = [...new Set(objects.map(modulePath))]
    const models = new Map<string, ModelClass>()
    const files = new Map<string, string>()
    for (const path of paths) {
      const kind = path.slice(path.lastIndexOf('/') + 1)
      // No such module: kubernetes-models has no kind at this apiVersion.
      const model = await import(path).then((module: Record<string, unknown>) => module[kind], () => undefined)
      if (typeof model !== 'function') continue
      models.set(path, model as ModelClass)
      files.set(path, fileURLToPath(import.meta.resolve(path)).replace(/\.js$/, '.d.ts'))
    }
    const program = ts.createProgram([...files.values()], {
      module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, strict: true, noEmit: true, types: []
    })
    const checker = program.getTypeChecker()
    const declarations = new Map<string, ts.Type>()
    for (const [path, file] of files) {
      const source = program.getSourceFile(file)
      const module = source === undefined ? undefined : checker.getSymbolAtLocation(source)
      const kind = path.slice(path.lastIndexOf('/') + 1)
      const declared = module === undefined ? undefined : checker.getExportsOfModule(module).find((symbol) => symbol.name === `I${kind}`)
      if (declared === undefined) throw new Error(`kubernetes-models declares no I${kind} in ${file}`)
      declarations.set(path, checker.getDeclaredTypeOfSymbol(declared))
    }
    return new KubernetesSchemas(models, checker, declarations)
  }

  /** What the API server would refuse in `object`, one line each; empty when it would accept it. */
  problems (object: KubernetesObject): string[] {
    const path = modulePath(object)
    const Model = this.models.get(path)
    const declaration = this.declarations.get(path)
    if (Model === undefined || declaration === undefined) {
      return [`no Kubernetes schema for apiVersion ${object.apiVersion}, kind ${object.kind}: not a kind the Kubernetes API serves (or not loaded)`]
    }
    const problems: string[] = []
    try {
      new Model(asDecoded(object)).validate()
    } catch (error) {
      problems.push(error instanceof Error ? error.message : String(error))
    }
    this.unknownFields(object, declaration, '', problems)
    return problems
  }

  private unknownFields (value: unknown, declared: ts.Type, at: string, problems: string[]): void {
    if (value === null || typeof value !== 'object') return
    const type = this.checker.getNonNullableType(declared)
    // Free-form fields (any, unknown) accept anything; so does a union of object shapes, which the API has none of.
    if ((type.flags & (ts.TypeFlags.Any | ts.TypeFlags.Unknown)) !== 0 || type.isUnion()) return
    if (Array.isArray(value)) {
      const element = this.checker.isArrayType(type) ? this.checker.getTypeArguments(type as ts.TypeReference)[0] : undefined
      if (element === undefined) problems.push(`${at}: a list where the API expects ${this.checker.typeToString(type)}`)
      else value.forEach((item, index) => this.unknownFields(item, element, `${at}[${index}]`, problems))
      return
    }
    // Maps such as labels, annotations, ConfigMap data and resource quantities: any key.
    const anyKey = type.getStringIndexType()
    for (const [field, item] of Object.entries(value)) {
      const property = type.getProperty(field)
      if (property !== undefined) this.unknownFields(item, this.checker.getTypeOfSymbol(property), `${at}.${field}`, problems)
      else if (anyKey !== undefined) this.unknownFields(item, anyKey, `${at}.${field}`, problems)
      else problems.push(`${at}.${field}: a field the API does not know (${this.checker.typeToString(type).replace(/^I/, '')})`)
    }
  }
}
