// Offline checks of the rendered Kubernetes manifests (run by run.sh, which renders them):
//  1. every object validates against the Kubernetes schemas of kubernetes-models (and the
//     Prometheus Operator's for ServiceMonitor); an apiVersion/kind it has no model for fails;
//  2. every flag and RINGMASTER_* variable given to a ringmaster-* container is one its binary
//     prints in --help, and the binary's own parser accepts the container's arguments;
//  3. what the issue asks of the overlays: workers on host networking and not privileged, GPU
//     pools with nvidia.com/gpu limits and T4 / V100 node selectors;
//  4. references inside a render resolve (Secrets, ConfigMaps, Service selectors and ports,
//     probe ports, scrape targets, the ServiceMonitor), the scrape jobs are the ones the
//     dashboards query, and the dashboards ConfigMap holds the dashboards of dashboards/.
//
// usage: node validate.mjs --source DIR --promtool PATH
//          --render NAME=FILE... --help BINARY=HELP_FILE... --binary BINARY=PATH...
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

const NAMESPACE = 'ringmaster';
// Variables a ringmaster-* container may carry besides RINGMASTER_*, and who reads them.
const OTHER_ENV = {
  PGUSER: 'libpq (the scheduler\'s PostgreSQL user)',
  PGPASSWORD: 'libpq (the scheduler\'s PostgreSQL password)',
  NVIDIA_DRIVER_CAPABILITIES: 'the NVIDIA container runtime (NVML and CUDA libraries)',
};
// Secrets an overlay expects the operator to create (documented in docs/kubernetes.md).
const TLS_KEYS = ['tls.crt', 'tls.key', 'ca.crt'];
const EXTERNAL_SECRETS = {
  'overlays/gpu': {
    'ringmaster-postgres': ['username', 'password'],
    // The first admin bearer token (docs/kubernetes.md).
    'ringmaster-admin-token': ['token'],
    // The key that seals registry secrets (docs/kubernetes.md).
    'ringmaster-secrets-key': ['key'],
    // cert-manager's layout (docs/security.md).
    'ringmaster-scheduler-tls': TLS_KEYS,
    'ringmaster-metrics-tls': TLS_KEYS,
    'ringmaster-worker-tls': TLS_KEYS,
  },
};
// GPU pools an overlay must have: node selector value -> at least one GPU per worker.
const GPU_POOLS = { 'overlays/gpu': ['t4', 'v100'] };
const GPU_TYPE_LABEL = 'ringmaster.dev/gpu-type';
// Model packages of API groups outside kubernetes-models.
const CRD_PACKAGES = { 'monitoring.coreos.com': '@kubernetes-models/prometheus-operator' };
const COMPONENT_JOBS = ['ringmaster-scheduler', 'ringmaster-worker', 'ringmaster-metrics'];

const errors = [];
const fail = (where, message) => errors.push(`${where}: ${message}`);

function parseArgs(argv) {
  const opts = { render: [], help: {}, binary: {}, source: '', promtool: '' };
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, value] = [argv[i], argv[i + 1]];
    if (value === undefined) throw new Error(`${flag} needs a value`);
    const eq = value.indexOf('=');
    if (flag === '--source') opts.source = value;
    else if (flag === '--promtool') opts.promtool = value;
    else if (flag === '--render') opts.render.push([value.slice(0, eq), value.slice(eq + 1)]);
    else if (flag === '--help') opts.help[value.slice(0, eq)] = value.slice(eq + 1);
    else if (flag === '--binary') opts.binary[value.slice(0, eq)] = value.slice(eq + 1);
    else throw new Error(`unknown argument ${flag}`);
  }
  return opts;
}

// `  --postgres-url (RINGMASTER_POSTGRES_URL, default '...')` and the help line under it ->
// flag and variable names, and each flag's default (with the help for defaults it computes).
function namesFromHelp(text) {
  const flags = new Set();
  const env = new Set();
  const defaults = {};
  const re = /^ {2}--([a-z0-9-]+) \((RINGMASTER_[A-Z0-9_]+), default '([^']*)'\)\n(.*)$/gm;
  for (const m of text.matchAll(re)) {
    flags.add(m[1]);
    env.add(m[2]);
    defaults[m[1]] = { value: m[3], help: m[4] };
  }
  return { flags, env, defaults };
}

const envName = (flag) => `RINGMASTER_${flag.toUpperCase().replaceAll('-', '_')}`;

// The port a listen flag ends up on: its value (flag, else variable, else default), or the
// ADDRESS:PORT the help names when the binary derives it.
function listenPort(flag, args, env, names) {
  const arg = args.find((a) => a.startsWith(`--${flag}=`));
  const variable = env.find((e) => e.name === envName(flag));
  const value = arg
    ? arg.slice(arg.indexOf('=') + 1)
    : (variable?.value ?? names.defaults[flag]?.value ?? '');
  const m = value.match(/:(\d+)$/) ?? names.defaults[flag]?.help.match(/ADDRESS:(\d+)/);
  return m ? Number(m[1]) : undefined;
}

function loadObjects(file, where) {
  const objects = [];
  for (const doc of parseAllDocuments(readFileSync(file, 'utf8'))) {
    if (doc.errors.length) fail(where, `YAML: ${doc.errors[0].message}`);
    const obj = doc.toJS();
    if (obj) objects.push(obj);
  }
  return objects;
}

async function modelFor(apiVersion, kind) {
  const slash = apiVersion.indexOf('/');
  const group = slash < 0 ? '' : apiVersion.slice(0, slash);
  const pkg = CRD_PACKAGES[group] ?? 'kubernetes-models';
  let mod;
  try {
    mod = await import(`${pkg}/${apiVersion}`);
  } catch {
    return null;
  }
  const cls = mod[kind];
  return cls && cls.apiVersion === apiVersion && cls.kind === kind ? cls : null;
}

const id = (o) => `${o.kind}/${o.metadata?.name}`;
const podSpecOf = (o) =>
  ['Deployment', 'DaemonSet', 'StatefulSet', 'Job', 'ReplicaSet'].includes(o.kind)
    ? o.spec?.template?.spec
    : o.kind === 'Pod'
      ? o.spec
      : undefined;
const podLabelsOf = (o) =>
  (o.kind === 'Pod' ? o.metadata?.labels : o.spec?.template?.metadata?.labels) ?? {};
const matches = (selector, labels) =>
  Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);
// A container's program and its arguments, past an init wrapper (`tini --`).
function commandLine(c) {
  let argv = [...(c.command ?? []), ...(c.args ?? [])];
  if (['tini', 'dumb-init'].includes(path.basename(argv[0] ?? ''))) {
    argv = argv.slice(argv[1] === '--' ? 2 : 1);
  }
  return { binary: path.basename(argv[0] ?? ''), args: argv.slice(1) };
}
const binaryOf = (c) => commandLine(c).binary;

async function checkSchemas(where, objects) {
  for (const o of objects) {
    const cls = await modelFor(o.apiVersion ?? '', o.kind ?? '');
    if (!cls) {
      fail(`${where} ${o.apiVersion} ${o.kind} ${o.metadata?.name}`, 'no schema for it');
      continue;
    }
    // kustomize folds long Secret values (certificates) over several lines; the API server's
    // base64 decoder skips the line breaks, the schema's "byte" format does not.
    const unfolded = o.kind === 'Secret' && o.data
      ? { ...o, data: Object.fromEntries(Object.entries(o.data).map(([k, v]) =>
        [k, typeof v === 'string' ? v.replace(/\s+/g, '') : v])) }
      : o;
    try {
      new cls(unfolded).validate();
    } catch (e) {
      fail(`${where} ${id(o)}`, `schema: ${e.message}`);
    }
  }
}

function checkContainers(where, objects, opts, helpNames, parsedArgs) {
  for (const o of objects) {
    const spec = podSpecOf(o);
    if (!spec) continue;
    if (spec.hostPID || spec.hostIPC) fail(`${where} ${id(o)}`, 'shares host PID or IPC');
    for (const c of [...(spec.initContainers ?? []), ...(spec.containers ?? [])]) {
      const at = `${where} ${id(o)} container ${c.name}`;
      if (c.securityContext?.privileged) fail(at, 'is privileged');
      if (c.securityContext?.allowPrivilegeEscalation !== false) {
        fail(at, 'must set securityContext.allowPrivilegeEscalation: false');
      }
      const ports = new Set((c.ports ?? []).flatMap((p) => [p.containerPort, p.name]));
      for (const probe of [c.startupProbe, c.readinessProbe, c.livenessProbe]) {
        const port = probe?.grpc?.port ?? probe?.httpGet?.port ?? probe?.tcpSocket?.port;
        if (port !== undefined && !ports.has(port)) fail(at, `probe port ${port} is not declared`);
      }
      const { binary, args } = commandLine(c);
      // The all-in-one image runs nothing by itself: the command says which program.
      if (/^([^/]+\/)*ringmaster(:|$)/.test(c.image) && !binary.startsWith('ringmaster-')) {
        fail(at, `image ${c.image} needs a command naming a ringmaster-* program`);
      }
      if (!binary.startsWith('ringmaster-')) continue;
      const names = helpNames[binary];
      if (!names) {
        fail(at, `runs ${binary}, which the test was given no --help of`);
        continue;
      }
      if (c.envFrom) fail(at, 'envFrom hides which variables it sets; list them under env');
      const given = new Set();
      for (const arg of args) {
        // One token per flag: a `--flag value` pair whose value went missing would silently
        // take the next flag as its value.
        if (!/^--[a-z0-9-]+=/.test(arg)) {
          fail(at, `argument ${arg}: write flags as --name=value`);
          continue;
        }
        const flag = arg.slice(2).split('=')[0];
        if (!names.flags.has(flag)) fail(at, `flag --${flag} is not one ${binary} accepts`);
        given.add(envName(flag));
      }
      for (const e of c.env ?? []) {
        if (e.name.startsWith('RINGMASTER_')) {
          if (!names.env.has(e.name)) fail(at, `variable ${e.name} is not one ${binary} reads`);
          if (given.has(e.name)) fail(at, `${e.name} is also given as a flag, which wins`);
        } else if (!(e.name in OTHER_ENV)) {
          fail(at, `variable ${e.name}: neither RINGMASTER_* nor ${Object.keys(OTHER_ENV)}`);
        }
      }
      // The ports the pod declares are the ones the binary listens on.
      for (const [portName, flag] of [['grpc', 'listen'], ['metrics', 'metrics-listen']]) {
        if (!names.flags.has(flag)) continue;
        const want = listenPort(flag, args, c.env ?? [], names);
        const declared = (c.ports ?? []).find((p) => p.name === portName);
        if (declared?.containerPort !== want) {
          const has = declared?.containerPort;
          fail(at, `port ${portName} is ${has}, but --${flag} listens on ${want}`);
        }
      }
      // The binary's own parser: unknown flags and flags without a value exit non-zero.
      const argv = args.map((a) => a.replace(/\$\([A-Za-z0-9_]+\)/g, 'x'));
      const key = `${binary} ${JSON.stringify(argv)}`;
      if (parsedArgs.has(key)) continue;
      parsedArgs.add(key);
      const run = spawnSync(opts.binary[binary], [...argv, '--help'], {
        env: { PATH: process.env.PATH },
        encoding: 'utf8',
        timeout: 30000,
      });
      if (run.status !== 0) {
        fail(at, `${binary} ${argv.join(' ')} --help exits ${run.status}: ${run.stderr.trim()}`);
      }
    }
  }
}

function checkReferences(where, objects) {
  const byKind = (kind) => objects.filter((o) => o.kind === kind);
  const named = (kind) => new Map(byKind(kind).map((o) => [o.metadata.name, o]));
  const secrets = named('Secret');
  const configMaps = named('ConfigMap');
  const external = EXTERNAL_SECRETS[where] ?? {};
  const keysOf = (o) => new Set(Object.keys({ ...(o.data ?? {}), ...(o.stringData ?? {}) }));
  const needKey = (at, kind, name, key) => {
    const obj = (kind === 'Secret' ? secrets : configMaps).get(name);
    if (obj) {
      if (key !== undefined && !keysOf(obj).has(key)) fail(at, `${kind} ${name} has no key ${key}`);
    } else if (kind === 'Secret' && external[name]) {
      if (key !== undefined && !external[name].includes(key)) {
        fail(at, `external Secret ${name} is documented without key ${key}`);
      }
    } else {
      fail(at, `refers to ${kind} ${name}, which is not in the render`);
    }
  };
  for (const o of objects) {
    if (o.kind !== 'Namespace' && o.metadata?.namespace !== NAMESPACE) {
      fail(`${where} ${id(o)}`, `is in namespace ${o.metadata?.namespace}, not ${NAMESPACE}`);
    }
    const spec = podSpecOf(o);
    if (!spec) continue;
    for (const v of spec.volumes ?? []) {
      if (v.configMap) needKey(`${where} ${id(o)} volume ${v.name}`, 'ConfigMap', v.configMap.name);
      if (v.secret) needKey(`${where} ${id(o)} volume ${v.name}`, 'Secret', v.secret.secretName);
    }
    for (const c of spec.containers ?? []) {
      const at = `${where} ${id(o)} container ${c.name}`;
      for (const e of c.env ?? []) {
        const s = e.valueFrom?.secretKeyRef;
        const m = e.valueFrom?.configMapKeyRef;
        if (s) needKey(at, 'Secret', s.name, s.key);
        if (m) needKey(at, 'ConfigMap', m.name, m.key);
      }
      const mounts = new Set([
        ...(spec.volumes ?? []).map((v) => v.name),
        ...(o.spec.volumeClaimTemplates ?? []).map((v) => v.metadata.name),
      ]);
      for (const vm of c.volumeMounts ?? []) {
        if (!mounts.has(vm.name)) fail(at, `mounts volume ${vm.name}, which the pod lacks`);
      }
    }
  }
  const workloads = objects.filter((o) => podSpecOf(o));
  for (const svc of byKind('Service')) {
    const at = `${where} ${id(svc)}`;
    const pods = workloads.filter((w) => matches(svc.spec.selector, podLabelsOf(w)));
    if (!pods.length) {
      fail(at, 'selects no pods');
      continue;
    }
    for (const p of svc.spec.ports ?? []) {
      const target = p.targetPort ?? p.port;
      for (const w of pods) {
        const ports = podSpecOf(w).containers.flatMap((c) => c.ports ?? []);
        if (!ports.some((cp) => cp.name === target || cp.containerPort === target)) {
          fail(at, `port ${p.name} targets ${target}, which ${id(w)} does not expose`);
        }
      }
    }
  }
  for (const w of workloads) {
    if (w.spec.selector && !matches(w.spec.selector.matchLabels, podLabelsOf(w))) {
      fail(`${where} ${id(w)}`, 'selector does not match its own pod template');
    }
  }
  return { named, byKind };
}

// Workers: host networking (ranks talk host to host), cluster DNS, reachable at the node's IP.
function checkWorkers(where, objects) {
  const workers = objects.filter(
    (o) =>
      o.kind === 'DaemonSet' && podLabelsOf(o)['app.kubernetes.io/name'] === 'ringmaster-worker',
  );
  if (!workers.length) fail(where, 'has no worker DaemonSet');
  for (const w of workers) {
    const at = `${where} ${id(w)}`;
    const spec = podSpecOf(w);
    if (spec.hostNetwork !== true) fail(at, 'must use hostNetwork: true');
    if (spec.dnsPolicy !== 'ClusterFirstWithHostNet') {
      fail(at, 'needs dnsPolicy ClusterFirstWithHostNet to resolve Services on the host network');
    }
    const c = spec.containers.find((x) => binaryOf(x) === 'ringmaster-worker');
    if (!c) {
      fail(at, 'has no ringmaster-worker container');
      continue;
    }
    const address = (c.env ?? []).find((e) => e.name === 'RINGMASTER_ADDRESS');
    if (address?.valueFrom?.fieldRef?.fieldPath !== 'status.hostIP') {
      fail(at, 'RINGMASTER_ADDRESS must come from status.hostIP');
    }
  }
  const pools = GPU_POOLS[where];
  if (!pools) return;
  for (const type of pools) {
    const pool = workers.filter((w) => podSpecOf(w).nodeSelector?.[GPU_TYPE_LABEL] === type);
    if (!pool.length) fail(where, `has no worker DaemonSet selecting ${GPU_TYPE_LABEL}=${type}`);
    for (const w of pool) {
      const c = podSpecOf(w).containers.find((x) => binaryOf(x) === 'ringmaster-worker');
      if (!(Number(c?.resources?.limits?.['nvidia.com/gpu']) >= 1)) {
        fail(`${where} ${id(w)}`, 'must have a limit of nvidia.com/gpu');
      }
    }
  }
  for (const w of workers) {
    const type = podSpecOf(w).nodeSelector?.[GPU_TYPE_LABEL];
    if (!pools.includes(type)) fail(`${where} ${id(w)}`, `selects no GPU pool (${GPU_TYPE_LABEL})`);
  }
  if (objects.some((o) => o.kind === 'Secret')) {
    fail(where, 'renders a Secret: its credentials are to be created outside the repository');
  }
}

// Metrics wiring: the jobs Prometheus scrapes (or the ServiceMonitor derives) are the ones the
// dashboards query, their targets exist, and the dashboards are those of dashboards/.
function checkMonitoring(where, objects, refs, opts) {
  const { named, byKind } = refs;
  const services = named('Service');
  const dashboardsDir = path.join(opts.source, 'dashboards');
  const board = named('ConfigMap').get('ringmaster-dashboards');
  const queriedJobs = new Set(COMPONENT_JOBS);
  if (!board) {
    fail(where, 'has no ConfigMap ringmaster-dashboards');
  } else {
    for (const file of ['cluster.json', 'jobs.json', 'queues.json']) {
      const want = readFileSync(path.join(dashboardsDir, file), 'utf8');
      if (board.data?.[file] !== want) {
        fail(where, `ConfigMap ringmaster-dashboards ${file} differs from dashboards/${file}`);
      }
      for (const m of want.matchAll(/job=\\"([^"\\]+)\\"/g)) queriedJobs.add(m[1]);
    }
  }
  const promConfig = byKind('ConfigMap').find((c) => c.data?.['prometheus.yml']);
  const monitors = byKind('ServiceMonitor');
  if (!promConfig && !monitors.length) fail(where, 'has no scrape config and no ServiceMonitor');
  if (promConfig) {
    const text = promConfig.data['prometheus.yml'];
    const dir = mkdtempSync(path.join(tmpdir(), 'ringmaster-k8s-'));
    writeFileSync(path.join(dir, 'prometheus.yml'), text);
    const run = spawnSync(opts.promtool, ['check', 'config', path.join(dir, 'prometheus.yml')], {
      encoding: 'utf8',
    });
    rmSync(dir, { recursive: true });
    if (run.status !== 0) fail(where, `promtool check config: ${run.stdout}${run.stderr}`);
    const config = parseAllDocuments(text)[0].toJS();
    const jobs = new Map((config.scrape_configs ?? []).map((j) => [j.job_name, j]));
    for (const job of queriedJobs) {
      if (!jobs.has(job)) fail(where, `Prometheus has no scrape job ${job}`);
    }
    for (const [name, job] of jobs) {
      const targets = [
        ...(job.static_configs ?? []).flatMap((s) => s.targets),
        ...(job.dns_sd_configs ?? []).flatMap((d) => d.names.map((n) => `${n}:${d.port}`)),
      ];
      for (const target of targets) {
        const [host, port] = target.split(':');
        const svc = services.get(host);
        if (!svc || !svc.spec.ports.some((p) => p.port === Number(port))) {
          fail(where, `scrape job ${name} targets ${target}, which is no Service port here`);
        } else if (job.dns_sd_configs && svc.spec.clusterIP !== 'None') {
          fail(where, `scrape job ${name} resolves ${host} per pod, but it is not headless`);
        }
      }
    }
  }
  for (const sm of monitors) {
    const selected = [...services.values()].filter(
      (s) =>
        matches(sm.spec.selector.matchLabels, s.metadata.labels ?? {}) &&
        (sm.spec.selector.matchExpressions ?? []).every(
          (e) => e.operator === 'In' && e.values.includes(s.metadata.labels?.[e.key]),
        ),
    );
    // The job label of a ServiceMonitor's targets is the Service's name.
    for (const job of queriedJobs) {
      const svc = selected.find((s) => s.metadata.name === job);
      if (!svc) fail(`${where} ${id(sm)}`, `selects no Service ${job}`);
      for (const ep of sm.spec.endpoints) {
        if (svc && !svc.spec.ports.some((p) => p.name === ep.port)) {
          fail(`${where} ${id(sm)}`, `Service ${job} has no port ${ep.port}`);
        }
      }
    }
  }
}

const opts = parseArgs(process.argv.slice(2));
const helpNames = Object.fromEntries(
  Object.entries(opts.help).map(([bin, file]) => [bin, namesFromHelp(readFileSync(file, 'utf8'))]),
);
for (const [bin, names] of Object.entries(helpNames)) {
  if (!names.flags.size) fail(bin, '--help lists no flags (has its format changed?)');
}
const parsedArgs = new Set();
let count = 0;
for (const [where, file] of opts.render) {
  const objects = loadObjects(file, where);
  count += objects.length;
  await checkSchemas(where, objects);
  checkContainers(where, objects, opts, helpNames, parsedArgs);
  if (!/^overlays\/[^/]+$/.test(where)) continue;
  const refs = checkReferences(where, objects);
  checkWorkers(where, objects);
  checkMonitoring(where, objects, refs, opts);
}
for (const e of errors) console.error(`FAIL ${e}`);
const verdict = errors.length ? `${errors.length} problems` : 'all valid';
console.log(`${count} objects in ${opts.render.length} renders, ${parsedArgs.size} container ` +
  `command lines parsed by their binaries: ${verdict}`);
process.exit(errors.length ? 1 : 0);
