/**
 * The Kubernetes manifests (deploy/kubernetes) as an operator applies them: each overlay rendered by kubectl's own
 * kustomize, every object checked against the Kubernetes API's schemas, then what the operator relies on: probes that
 * agree with the drain, pods without privileges, selectors that find the pods, configuration the service accepts.
 * Needs kubectl (KUBECTL, else on PATH): with CI=true a missing one fails, elsewhere the tests are skipped.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment'
import type { IStatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler'
import type { IJob } from 'kubernetes-models/batch/v1/Job'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap'
import type { IContainer } from 'kubernetes-models/v1/Container'
import type { IPodTemplateSpec } from 'kubernetes-models/v1/PodTemplateSpec'
import type { ISecret } from 'kubernetes-models/v1/Secret'
import type { IService } from 'kubernetes-models/v1/Service'
import { parseAllDocuments } from 'yaml'
import { loadConfig, type Config } from '../../src/config.js'
import { requireService } from '../helpers/services.js'
import { KubernetesSchemas, type KubernetesObject } from './kubernetes-schemas.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const OVERLAYS = join(ROOT, 'deploy/kubernetes/overlays')
const KUBECTL = process.env.KUBECTL ?? 'kubectl'
const IMAGE = 'petstore-inventory:1.0.0'
/** The labels every object carries (commonLabels), which `kubectl get -l` and the selectors rely on. */
const COMMON_LABELS = { 'app.kubernetes.io/name': 'petstore-inventory', 'app.kubernetes.io/instance': 'petstore' }
/** The user and group the image runs as, and owns /data as. */
const UID = 1000

const run = promisify(execFile)

async function kubectlRuns (): Promise<boolean> {
  return await run(KUBECTL, ['version', '--client'], { timeout: 20_000 }).then(() => true, () => false)
}

/** `kubectl kustomize DIR`, parsed: the objects `kubectl apply -k DIR` would send. */
async function kustomize (dir: string): Promise<KubernetesObject[]> {
  const { stdout } = await run(KUBECTL, ['kustomize', dir], { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 })
  return parseAllDocuments(stdout).map((document) => {
    if (document.errors.length > 0) throw new Error(`kubectl kustomize ${dir} printed invalid YAML: ${document.errors[0]?.message}`)
    return document.toJS() as KubernetesObject
  }).filter((object) => object !== null)
}

function named (object: KubernetesObject | { kind?: string, metadata?: { name?: string } }): string {
  return `${object.kind}/${object.metadata?.name}`
}

function ofKind<T> (objects: readonly KubernetesObject[], kind: string): T[] {
  return objects.filter((object) => object.kind === kind) as unknown as T[]
}

function one<T> (objects: readonly KubernetesObject[], kind: string): T {
  const found = ofKind<T>(objects, kind)
  assert.equal(found.length, 1, `expected one ${kind}, the overlay renders ${found.length}`)
  return found[0] as T
}

interface Selector {
  matchLabels?: Record<string, string>
  matchExpressions?: Array<{ key: string, operator: string, values?: string[] }>
}

/** Whether a label selector (or a Service's plain map) selects an object with `labels`, as the API decides it. */
function selects (selector: Selector | Record<string, string> | undefined, labels: Record<string, string> = {}): boolean {
  if (selector === undefined) return false
  const { matchLabels, matchExpressions } = 'matchLabels' in selector || 'matchExpressions' in selector
    ? selector as Selector
    : { matchLabels: selector as Record<string, string>, matchExpressions: [] }
  return Object.entries(matchLabels ?? {}).every(([key, value]) => labels[key] === value) &&
    (matchExpressions ?? []).every(({ key, operator, values = [] }) => {
      if (operator === 'In') return values.includes(labels[key] ?? '')
      if (operator === 'NotIn') return !values.includes(labels[key] ?? '')
      if (operator === 'Exists') return key in labels
      if (operator === 'DoesNotExist') return !(key in labels)
      throw new Error(`unknown selector operator ${operator}`)
    })
}

/** An object that runs pods (Deployment/petstore, Job/petstore-migrate, ...) and their template. */
interface Workload { owner: string, kind: string, template: IPodTemplateSpec }

function workloadsOf (objects: readonly KubernetesObject[]): Workload[] {
  return objects.flatMap((object) => {
    const template = (object.spec as { template?: IPodTemplateSpec } | undefined)?.template
    return template === undefined ? [] : [{ owner: named(object), kind: object.kind, template }]
  })
}

function containersOf ({ template }: Workload): IContainer[] {
  return [...(template.spec?.initContainers ?? []), ...(template.spec?.containers ?? [])]
}

/** The one workload whose pods serve HTTP: the Deployment or the StatefulSet (not the migration Job). */
function serving (objects: readonly KubernetesObject[]): { workload: Workload, container: IContainer } {
  const found = workloadsOf(objects).filter(({ kind }) => kind === 'Deployment' || kind === 'StatefulSet')
  assert.equal(found.length, 1, `expected one workload serving HTTP, got ${found.map(({ owner }) => owner).join(', ')}`)
  const [workload] = found as [Workload]
  const [container, ...others] = workload.template.spec?.containers ?? []
  assert.ok(container !== undefined && others.length === 0, `${workload.owner} runs one container`)
  return { workload, container }
}

/**
 * The variables a container starts with from its ConfigMaps and Secrets (by their rendered, hashed names) and its
 * own `env`. A reference to an object the overlay does not render fails: the pod would never start.
 */
function environment (container: IContainer, objects: readonly KubernetesObject[]): Record<string, string> {
  const env: Record<string, string> = {}
  for (const source of container.envFrom ?? []) {
    const prefix = source.prefix ?? ''
    if (source.configMapRef !== undefined) {
      const configMap = ofKind<IConfigMap>(objects, 'ConfigMap').find(({ metadata }) => metadata?.name === source.configMapRef?.name)
      assert.ok(configMap !== undefined, `container ${container.name} reads ConfigMap ${source.configMapRef.name}, which the overlay does not render`)
      for (const [name, value] of Object.entries(configMap.data ?? {})) env[prefix + name] = value
    }
    if (source.secretRef !== undefined) {
      const secret = ofKind<ISecret>(objects, 'Secret').find(({ metadata }) => metadata?.name === source.secretRef?.name)
      assert.ok(secret !== undefined, `container ${container.name} reads Secret ${source.secretRef.name}, which the overlay does not render`)
      for (const [name, value] of Object.entries(secret.data ?? {})) env[prefix + name] = Buffer.from(value, 'base64').toString('utf8')
      for (const [name, value] of Object.entries(secret.stringData ?? {})) env[prefix + name] = value
    }
  }
  for (const variable of container.env ?? []) if (variable.value !== undefined) env[variable.name] = variable.value
  return env
}

/** The service's own reading of a container's environment: what `petstore serve` would start with, or exit 2. */
function configOf (container: IContainer, objects: readonly KubernetesObject[]): Config {
  return loadConfig(environment(container, objects), '/app')
}

function portNamed (container: IContainer, port: number | string | undefined): number | undefined {
  return typeof port === 'number' ? port : container.ports?.find(({ name }) => name === port)?.containerPort
}

/** Every port a set of policies opens, as PROTOCOL/PORT; a rule without ports opens every port. */
function openPorts (rules: ReadonlyArray<{ ports?: Array<{ protocol?: string, port?: number | string }> }>): string[] {
  return [...new Set(rules.flatMap(({ ports }) => ports === undefined || ports.length === 0
    ? ['every port']
    : ports.map(({ protocol, port }) => `${protocol ?? 'TCP'}/${port ?? 'every port'}`)))].sort()
}

if (await requireService('kubectl', KUBECTL, kubectlRuns, 'the Kubernetes manifests (deploy/kubernetes)',
  'KUBECTL to a kubectl binary (CI installs Debian\'s kubernetes-client: apt-get install kubernetes-client)')) {
  const rendered = new Map<string, KubernetesObject[]>()
  let schemas: KubernetesSchemas
  const objectsOf = (overlay: string): KubernetesObject[] => {
    const objects = rendered.get(overlay)
    assert.ok(objects !== undefined, `${overlay} was not rendered`)
    return objects
  }

  before(async () => {
    for (const overlay of ['scale-out', 'embedded']) rendered.set(overlay, await kustomize(join(OVERLAYS, overlay)))
    // One TypeScript program for both overlays' kinds: building it is most of this file's second or two.
    schemas = await KubernetesSchemas.load([...rendered.values()].flat())
  })

  /** What holds for either overlay, registered inside its describe. */
  const everyOverlay = (overlay: 'scale-out' | 'embedded'): void => {
    test('when rendered, then every object is valid for the Kubernetes schema of its kind and names no field the API does not know', () => {
      const objects = objectsOf(overlay)
      assert.ok(objects.length > 0)
      const problems = objects.flatMap((object) => schemas.problems(object).map((problem) => `${named(object)}: ${problem}`))
      assert.deepEqual(problems, [])
    })

    test('every object and pod carries the common labels, which kubectl get -l and the selectors rely on', () => {
      for (const object of objectsOf(overlay)) {
        assert.ok(selects(COMMON_LABELS, object.metadata.labels), `${named(object)} lacks the common labels: ${JSON.stringify(object.metadata.labels)}`)
      }
      for (const { owner, template } of workloadsOf(objectsOf(overlay))) {
        assert.ok(selects(COMMON_LABELS, template.metadata?.labels), `the pods of ${owner} lack the common labels`)
      }
    })

    test('every container runs as uid and gid 1000, never as root, on a read-only root filesystem, without privilege escalation or capabilities, under the runtime\'s seccomp profile, and without a service account token', () => {
      const workloads = workloadsOf(objectsOf(overlay))
      assert.ok(workloads.length > 0)
      for (const workload of workloads) {
        const spec = workload.template.spec
        assert.ok(spec !== undefined)
        assert.equal(spec.automountServiceAccountToken, false, `${workload.owner} mounts a service account token`)
        assert.ok(spec.hostNetwork !== true && spec.hostPID !== true && spec.hostIPC !== true, `${workload.owner} shares a host namespace`)
        const pod = spec.securityContext ?? {}
        for (const container of containersOf(workload)) {
          const where = `${workload.owner}, container ${container.name}`
          const own = container.securityContext ?? {}
          // A container's own settings override the pod's.
          assert.equal(own.runAsNonRoot ?? pod.runAsNonRoot, true, `${where}: runAsNonRoot`)
          assert.equal(own.runAsUser ?? pod.runAsUser, UID, `${where}: runAsUser`)
          assert.equal(own.runAsGroup ?? pod.runAsGroup, UID, `${where}: runAsGroup`)
          assert.equal((own.seccompProfile ?? pod.seccompProfile)?.type, 'RuntimeDefault', `${where}: seccompProfile`)
          assert.equal(own.readOnlyRootFilesystem, true, `${where}: readOnlyRootFilesystem`)
          assert.equal(own.allowPrivilegeEscalation, false, `${where}: allowPrivilegeEscalation`)
          assert.notEqual(own.privileged, true, `${where}: privileged`)
          assert.deepEqual(own.capabilities, { drop: ['ALL'] }, `${where}: capabilities`)
        }
      }
    })

    test('no Service in the namespace can add variables to a pod (enableServiceLinks: false; a Service named metrics would set METRICS_PORT)', () => {
      for (const { owner, template } of workloadsOf(objectsOf(overlay))) {
        assert.equal(template.spec?.enableServiceLinks, false, `${owner} gets the namespace's service-link variables`)
      }
    })

    test('every envFrom names a ConfigMap or Secret the overlay renders, by its hashed name, and every container\'s environment is a configuration the service accepts', () => {
      const objects = objectsOf(overlay)
      for (const workload of workloadsOf(objects)) {
        for (const container of containersOf(workload)) {
          assert.ok((container.envFrom ?? []).length > 0, `${workload.owner}, container ${container.name} reads no configuration`)
          // loadConfig throws a ConfigError on any invalid value, as `petstore serve` exits 2 with it.
          const config = configOf(container, objects)
          const env = environment(container, objects)
          assert.ok(env.SHUTDOWN_DRAIN_MS !== undefined && env.SHUTDOWN_TIMEOUT_MS !== undefined, 'the shutdown times are set, not left to defaults')
          assert.equal(config.logFormat, 'json')
          assert.equal(config.host, '0.0.0.0')
        }
      }
      for (const generated of [...ofKind<IConfigMap>(objects, 'ConfigMap'), ...ofKind<ISecret>(objects, 'Secret')]) {
        // The hash of the contents in the name is what rolls the pods when a value changes.
        assert.match(generated.metadata?.name ?? '', /^petstore-(config|secrets)-[a-z0-9]{10}$/)
      }
    })

    test('every container requests CPU and memory and is limited in both', () => {
      for (const workload of workloadsOf(objectsOf(overlay))) {
        for (const container of containersOf(workload)) {
          const { requests = {}, limits = {} } = container.resources ?? {}
          assert.deepEqual([Object.keys(requests).sort(), Object.keys(limits).sort()], [['cpu', 'memory'], ['cpu', 'memory']],
            `${workload.owner}, container ${container.name}: ${JSON.stringify(container.resources)}`)
        }
      }
    })

    test('every container runs the service\'s image, the name an operator\'s images: entry replaces', () => {
      for (const workload of workloadsOf(objectsOf(overlay))) {
        for (const container of containersOf(workload)) assert.equal(container.image, IMAGE, `${workload.owner}, container ${container.name}`)
      }
    })

    test('the serving pods\' readiness probe is GET /readyz on the http port, PORT, and takes a stopping pod out within SHUTDOWN_DRAIN_MS; liveness and startup are GET /healthz', () => {
      const objects = objectsOf(overlay)
      const { container } = serving(objects)
      const config = configOf(container, objects)
      const { readinessProbe, livenessProbe, startupProbe } = container
      assert.deepEqual([readinessProbe?.httpGet?.path, readinessProbe?.httpGet?.port], ['/readyz', 'http'])
      assert.deepEqual([livenessProbe?.httpGet?.path, livenessProbe?.httpGet?.port], ['/healthz', 'http'])
      assert.deepEqual([startupProbe?.httpGet?.path, startupProbe?.httpGet?.port], ['/healthz', 'http'])
      assert.equal(portNamed(container, 'http'), config.port, 'the http port is the one the service listens on')
      // After SIGTERM /readyz answers 503; the kubelet sees it within period x failureThreshold (by default 10 s x 3),
      // and the drain must last that long.
      const unreadyWithinMs = (readinessProbe?.periodSeconds ?? 10) * (readinessProbe?.failureThreshold ?? 3) * 1000
      assert.ok(unreadyWithinMs <= config.shutdownDrainMs, `readiness notices a stop within ${unreadyWithinMs} ms, the drain lasts ${config.shutdownDrainMs} ms`)
    })

    test('terminationGracePeriodSeconds exceeds SHUTDOWN_DRAIN_MS + SHUTDOWN_TIMEOUT_MS, so the kubelet never kills a pod still finishing requests', () => {
      const objects = objectsOf(overlay)
      const { workload, container } = serving(objects)
      const config = configOf(container, objects)
      // The timeout starts when the drain ends (closeOnSignals, src/server.ts). Kubernetes' default grace is 30 s.
      const graceMs = (workload.template.spec?.terminationGracePeriodSeconds ?? 30) * 1000
      assert.ok(graceMs > config.shutdownDrainMs + config.shutdownTimeoutMs,
        `grace ${graceMs} ms, drain ${config.shutdownDrainMs} ms + timeout ${config.shutdownTimeoutMs} ms`)
    })

    test('every Service selects the serving pods and no others, and its port 80 reaches their named http port', () => {
      const objects = objectsOf(overlay)
      const services = ofKind<IService>(objects, 'Service')
      assert.ok(services.length > 0)
      const { workload, container } = serving(objects)
      for (const service of services) {
        assert.equal(service.spec?.type ?? 'ClusterIP', 'ClusterIP')
        const selected = workloadsOf(objects).filter(({ template }) => selects(service.spec?.selector, template.metadata?.labels))
        assert.deepEqual(selected.map(({ owner }) => owner), [workload.owner], `the pods ${named(service)} selects`)
        assert.ok((service.spec?.ports ?? []).length > 0)
        for (const port of service.spec?.ports ?? []) {
          assert.equal(port.port, 80)
          assert.equal(typeof port.targetPort, 'string', 'a named targetPort follows the container')
          assert.ok(portNamed(container, port.targetPort) !== undefined, `${named(service)} targets port ${port.targetPort}, which ${workload.owner} does not name`)
        }
      }
    })

    test(`the NetworkPolicies let every pod in on TCP 8080 only, and out to DNS${overlay === 'scale-out' ? ', PostgreSQL and Redis' : ''} only`, () => {
      const objects = objectsOf(overlay)
      const policies = ofKind<INetworkPolicy>(objects, 'NetworkPolicy')
      const egress = overlay === 'scale-out' ? ['TCP/26379', 'TCP/53', 'TCP/5432', 'TCP/6379', 'UDP/53'] : ['TCP/53', 'UDP/53']
      for (const workload of workloadsOf(objects)) {
        // Policies add up: a pod may do what any policy selecting it allows, in each direction a policy restricts.
        const applying = policies.filter(({ spec }) => selects(spec?.podSelector, workload.template.metadata?.labels))
        const restricting = (type: 'Ingress' | 'Egress'): INetworkPolicy[] => applying.filter(({ spec }) => (spec?.policyTypes ?? ['Ingress']).includes(type))
        assert.ok(restricting('Ingress').length > 0 && restricting('Egress').length > 0, `no policy restricts both directions of ${workload.owner}`)
        assert.deepEqual(openPorts(restricting('Ingress').flatMap(({ spec }) => spec?.ingress ?? [])), ['TCP/8080'], `what may reach ${workload.owner}`)
        assert.deepEqual(openPorts(restricting('Egress').flatMap(({ spec }) => spec?.egress ?? [])), egress, `what ${workload.owner} may reach`)
        for (const container of containersOf(workload)) {
          for (const port of container.ports ?? []) assert.equal(port.containerPort, 8080, `${workload.owner} listens on a port the policies keep closed`)
        }
      }
    })

    test('the shipped Secret holds placeholders only, each marked CHANGE_ME', () => {
      const secret = one<ISecret>(objectsOf(overlay), 'Secret')
      for (const [name, value] of Object.entries(secret.data ?? {})) {
        assert.match(Buffer.from(value, 'base64').toString('utf8'), /CHANGE_ME/, `${name} is not a placeholder`)
      }
    })
  }

  describe('the scale-out overlay', () => {
    everyOverlay('scale-out')

    test('the Deployment leaves its replica count to the HorizontalPodAutoscaler, which targets it and keeps 2 or more pods on CPU', () => {
      const objects = objectsOf('scale-out')
      const deployment = one<IDeployment>(objects, 'Deployment')
      const hpa = one<IHorizontalPodAutoscaler>(objects, 'HorizontalPodAutoscaler')
      // A count in the manifest would be set again by every kubectl apply, undoing the autoscaler.
      assert.equal(deployment.spec?.replicas, undefined)
      assert.deepEqual(hpa.spec?.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment.metadata?.name })
      assert.ok((hpa.spec?.minReplicas ?? 1) >= 2, `minReplicas ${hpa.spec?.minReplicas}`)
      assert.ok((hpa.spec?.maxReplicas ?? 0) >= (hpa.spec?.minReplicas ?? 1))
      assert.deepEqual(hpa.spec?.metrics?.map(({ type, resource }) => [type, resource?.name, resource?.target.type]), [['Resource', 'cpu', 'Utilization']])
    })

    test('the most pods the autoscaler runs hold fewer PostgreSQL connections than its default max_connections (100)', () => {
      const objects = objectsOf('scale-out')
      const hpa = one<IHorizontalPodAutoscaler>(objects, 'HorizontalPodAutoscaler')
      const pools = (hpa.spec?.maxReplicas ?? 0) * configOf(serving(objects).container, objects).database.poolSize
      assert.ok(pools < 100, `${pools} connections`)
    })

    test('a rolling update takes a serving pod away only once its replacement is ready', () => {
      const deployment = one<IDeployment>(objectsOf('scale-out'), 'Deployment')
      assert.equal(deployment.spec?.strategy?.type, 'RollingUpdate')
      assert.equal(deployment.spec?.strategy?.rollingUpdate?.maxUnavailable, 0)
      assert.ok(Number(deployment.spec?.strategy?.rollingUpdate?.maxSurge) >= 1)
    })

    test('the Deployment\'s pods spread across nodes', () => {
      const deployment = one<IDeployment>(objectsOf('scale-out'), 'Deployment')
      const byNode = deployment.spec?.template.spec?.topologySpreadConstraints?.find(({ topologyKey }) => topologyKey === 'kubernetes.io/hostname')
      assert.ok(byNode !== undefined)
      assert.ok(selects(byNode.labelSelector, deployment.spec?.template.metadata?.labels), 'the spread counts the Deployment\'s own pods')
    })

    test('the PodDisruptionBudget selects the serving pods, not the migration Job\'s, and lets a drain take one at a time', () => {
      const objects = objectsOf('scale-out')
      const pdb = one<IPodDisruptionBudget>(objects, 'PodDisruptionBudget')
      const selected = workloadsOf(objects).filter(({ template }) => selects(pdb.spec?.selector, template.metadata?.labels)).map(({ owner }) => owner)
      assert.deepEqual(selected, [serving(objects).workload.owner])
      assert.equal(pdb.spec?.maxUnavailable, 1)
    })

    test('the migration Job runs petstore migrate with the Deployment\'s image, configuration and security settings, retries, and is cleaned up', () => {
      const objects = objectsOf('scale-out')
      const job = one<IJob>(objects, 'Job')
      const deployment = one<IDeployment>(objects, 'Deployment')
      const [migrate] = job.spec?.template.spec?.containers ?? []
      const [serve] = deployment.spec?.template.spec?.containers ?? []
      assert.ok(migrate !== undefined && serve !== undefined)
      // The image's ENTRYPOINT is petstore: no command, and the arguments name the subcommand.
      assert.deepEqual([migrate.command, migrate.args, serve.command, serve.args], [undefined, ['migrate'], undefined, ['serve']])
      assert.equal(migrate.image, serve.image)
      assert.deepEqual(migrate.envFrom, serve.envFrom)
      assert.deepEqual(migrate.securityContext, serve.securityContext)
      assert.deepEqual(job.spec?.template.spec?.securityContext, deployment.spec?.template.spec?.securityContext)
      assert.ok(['Never', 'OnFailure'].includes(job.spec?.template.spec?.restartPolicy ?? ''))
      assert.ok((job.spec?.backoffLimit ?? 0) >= 1)
      assert.ok(job.spec?.ttlSecondsAfterFinished !== undefined, 'a finished Job is cleaned up')
    })

    test('the pods use PostgreSQL and Redis, whose addresses and the metrics token come from the Secret, never the ConfigMap', () => {
      const objects = objectsOf('scale-out')
      const config = configOf(serving(objects).container, objects)
      assert.match(config.databaseUrl, /^postgres:\/\//)
      assert.equal(config.redis?.mode, 'standalone')
      assert.notEqual(config.metrics.token, null)
      const configMap = one<IConfigMap>(objects, 'ConfigMap')
      const secret = one<ISecret>(objects, 'Secret')
      assert.deepEqual(Object.keys(secret.data ?? {}).sort(), ['DATABASE_URL', 'METRICS_TOKEN', 'REDIS_URL'])
      for (const name of ['DATABASE_URL', 'METRICS_TOKEN', 'REDIS_URL']) assert.equal(configMap.data?.[name], undefined, `${name} is in the ConfigMap`)
    })
  })

  describe('the embedded overlay', () => {
    everyOverlay('embedded')

    test('it is one StatefulSet replica with a /data volume claim writable by gid 1000, on SQLite at /data/petstore.db, without REDIS_URL', () => {
      const objects = objectsOf('embedded')
      const statefulSet = one<IStatefulSet>(objects, 'StatefulSet')
      assert.equal(statefulSet.spec?.replicas, 1)
      const [claim, ...others] = statefulSet.spec?.volumeClaimTemplates ?? []
      assert.ok(claim !== undefined && others.length === 0)
      assert.deepEqual(claim.spec?.accessModes, ['ReadWriteOnce'])
      assert.ok(claim.spec?.resources?.requests?.storage !== undefined)
      const { container } = serving(objects)
      assert.deepEqual(container.volumeMounts?.map(({ name, mountPath, readOnly }) => [name, mountPath, readOnly]), [[claim.metadata?.name, '/data', undefined]])
      assert.equal(statefulSet.spec?.template.spec?.securityContext?.fsGroup, UID)
      const env = environment(container, objects)
      assert.equal(env.DATABASE_URL, '/data/petstore.db')
      assert.equal('REDIS_URL' in env, false)
      assert.equal(configOf(container, objects).redis, null, 'the rate limits are counted in the process')
    })

    test('it has no Deployment, autoscaler, PodDisruptionBudget or Job: nothing that adds a second writer or blocks node drains', () => {
      const kinds = new Set(objectsOf('embedded').map(({ kind }) => kind))
      for (const kind of ['Deployment', 'HorizontalPodAutoscaler', 'PodDisruptionBudget', 'Job']) assert.equal(kinds.has(kind), false, kind)
    })
  })

  test('an operator\'s overlay (README.md) replaces the placeholder Secret and the image everywhere', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'petstore-kustomize-'))
    t.after(() => rm(dir, { recursive: true, force: true }))
    const secret = {
      DATABASE_URL: 'postgres://petstore:s3cret@db.internal:5432/petstore',
      REDIS_URL: 'redis://cache.internal:6379',
      METRICS_TOKEN: '0123456789abcdef0123456789abcdef'
    }
    await writeFile(join(dir, 'secret.env'), Object.entries(secret).map(([name, value]) => `${name}=${value}\n`).join(''))
    await writeFile(join(dir, 'kustomization.yaml'), [
      'bases:',
      `  - ${relative(dir, join(OVERLAYS, 'scale-out'))}`,
      'images:',
      '  - name: petstore-inventory',
      '    newName: registry.example/petstore-inventory',
      '    newTag: 1.0.1',
      'secretGenerator:',
      '  - name: petstore-secrets',
      '    behavior: replace',
      '    env: secret.env',
      ''
    ].join('\n'))

    const objects = await kustomize(dir)

    const workloads = workloadsOf(objects)
    assert.deepEqual(workloads.map(({ owner }) => owner).sort(), ['Deployment/petstore', 'Job/petstore-migrate'])
    for (const workload of workloads) {
      for (const container of containersOf(workload)) {
        assert.equal(container.image, 'registry.example/petstore-inventory:1.0.1', workload.owner)
        const env = environment(container, objects)
        assert.deepEqual([env.DATABASE_URL, env.REDIS_URL, env.METRICS_TOKEN], [secret.DATABASE_URL, secret.REDIS_URL, secret.METRICS_TOKEN], workload.owner)
      }
    }
  })
}
