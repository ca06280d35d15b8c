// Why this module exists: it builds a Weir operator written in JavaScript (or TypeScript) into
// a WebAssembly component of the world `operator` (abi/wit/operator.wit), in three steps:
//
// 1. it writes an entry module that imports the user's module and the SDK's component glue
//    (src/component.js) and exports `guest`, the WIT export;
// 2. it bundles the entry, the user's modules, the SDK and any npm packages they import into
//    one ES module with rolldown, keeping only `weir:operator/host@1.1.0` as an import (the
//    engine inside a component loads modules only from one directory, so the bundle is what
//    lets an operator live anywhere and import anything);
//    With the operator's keyed state on the host (a file beside it mentions ValueState), the
//    world is `keyed-operator` and the glue src/component-keyed.js, which also imports
//    `weir:operator/keyed-state@1.1.0`; otherwise the world `operator`, so that an operator
//    keeping no state on the host is given no store (the bindings import every function of
//    their world, used or not).
// 3. it runs componentize-js through its Node API (its `jco componentize` CLI fails here),
//    without the `http` and `fetch-event` features, which would make the component import
//    wasi:http, which the host refuses.
//
// The engine names the bundle's lines in an exception's stack (`process@operator.js:981:33`),
// which mean nothing to the operator's author. So the bundle is made with a source map, and a
// table from the bundle's lines to the author's files and lines is appended to it as a global
// (SOURCE_MAP_GLOBAL); the SDK's describeError (src/errors.js) rewrites the stack with it.
//
//   node guest-sdk/js/build.mjs OUT.wasm OPERATOR.js
//
// Relative paths resolve against the current directory. Silent on success; on failure it
// prints what failed and exits 1 (2 for a usage error).

import { mkdir, mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { builtinModules } from 'node:module';
import { basename, dirname, isAbsolute, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { rolldown } from 'rolldown';
import { componentize } from '@bytecodealliance/componentize-js';
import { componentWit } from '@bytecodealliance/jco';

const here = dirname(fileURLToPath(import.meta.url));
const WIT = resolve(here, '../../abi/wit/operator.wit');
const GLUE = resolve(here, 'src/component.js');
const KEYED_GLUE = resolve(here, 'src/component-keyed.js');
const HOST_IMPORTS = ['weir:operator/host@1.1.0', 'weir:operator/keyed-state@1.1.0'];
const NODE_BUILTINS = new Set(builtinModules);
/** The global the line table is kept in: the key src/errors.js reads it under. */
const SOURCE_MAP_GLOBAL = "Symbol.for('weir.sourceMap')";
const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** A failure found by this script rather than by the tools it runs. */
class BuildError extends Error {}

/**
 * Builds the component for the operator module `operatorPath` into `outPath`.
 *
 * @param {string} outPath where to write the component
 * @param {string} operatorPath the operator's module: its default export is the Operator
 *   subclass, or else its one exported Operator subclass
 */
export async function build(outPath, operatorPath) {
  const source = resolve(operatorPath);
  const out = resolve(outPath);
  if (!(await stat(source).catch(() => null))?.isFile()) {
    throw new BuildError(`the operator module ${operatorPath} does not exist`);
  }
  const keyed = await mentionsValueState(dirname(source));
  const work = await mkdtemp(join(tmpdir(), 'weir-js-build-'));
  try {
    const entry = join(work, 'entry.js');
    await writeFile(
      entry,
      `import * as operatorModule from ${JSON.stringify(source)};\n` +
        `import { exportGuest } from ${JSON.stringify(keyed ? KEYED_GLUE : GLUE)};\n` +
        `export const guest = exportGuest(operatorModule, ${JSON.stringify(basename(source))});\n`,
    );
    const bundled = join(work, 'operator.js');
    await bundle(entry, bundled);
    const component = await componentizeIn(work, bundled, keyed ? 'keyed-operator' : 'operator');
    await checkImports(component);
    await mkdir(dirname(out), { recursive: true });
    await writeFile(out, component);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * Whether a JavaScript or TypeScript file in `dir` (or below it, node_modules aside) mentions
 * ValueState: then the operator keeps keyed state on the host.
 *
 * @param {string} dir
 * @returns {Promise<boolean>}
 */
async function mentionsValueState(dir) {
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules' && !entry.name.startsWith('.') && (await mentionsValueState(path))) {
        return true;
      }
    } else if (/\.(m?js|ts)$/.test(entry.name) && /\bValueState\b/.test(await readFile(path, 'utf8'))) {
      return true;
    }
  }
  return false;
}

/**
 * Throws a BuildError if the component imports a network interface (wasi:http, wasi:sockets),
 * which the host refuses: it would mean componentize-js was run with other features.
 */
async function checkImports(component) {
  const wit = await componentWit(component);
  const imports = [...wit.matchAll(/^\s*import ([^;]+);/gm)].map((m) => m[1]);
  const network = imports.filter((name) => /^wasi:(http|sockets)\//.test(name));
  if (network.length > 0) {
    throw new BuildError(`the component imports ${network.join(', ')}, which the host refuses`);
  }
}

/** Bundles `entry` and everything it imports into the ES module `file`. */
async function bundle(entry, file) {
  const problems = [];
  const bundler = await rolldown({
    input: entry,
    platform: 'neutral',
    external: HOST_IMPORTS,
    plugins: [
      {
        name: 'weir-no-node-builtins',
        resolveId(id, importer) {
          if (id.startsWith('node:') || NODE_BUILTINS.has(id)) {
            problems.push(
              `${importer ?? 'the operator'} imports \`${id}\`, a Node.js module, but a component ` +
                'runs no Node.js (no files, no network, no process): keep tests, which import ' +
                'testing.js, apart from the operator module',
            );
            return { id, external: true };
          }
          return null;
        },
      },
    ],
    onLog(level, log) {
      // An import that does not resolve would fail only inside the engine, and cryptically.
      if (level === 'warn' && log.code === 'UNRESOLVED_IMPORT') problems.push(log.message);
      else if (level === 'warn') console.error(`weir: warning: ${log.message}`);
    },
  });
  try {
    await bundler.write({ file, format: 'esm', codeSplitting: false, sourcemap: true });
  } finally {
    await bundler.close();
  }
  if (problems.length > 0) throw new BuildError(problems.join('\n'));
  await appendLineTable(file);
}

/**
 * Appends to the bundle `file` the table describeError maps its stacks with, made from the
 * source map the bundler wrote beside it: `{ file, sources, lines }`, where `lines[n]` lists,
 * for the bundle's line n + 1, flat quadruples [column from 0, source index, line from 0,
 * column from 0] — only where the source line changes, which is all a stack needs. Appended
 * at the end, so that no line of the bundle moves. Sources are named as the user would type
 * them: relative to the directory of the build when inside it, else absolute.
 */
async function appendLineTable(file) {
  const map = JSON.parse(await readFile(`${file}.map`, 'utf8'));
  const sources = map.sources.map((source) => {
    const path = resolve(dirname(file), source);
    const local = relative(process.cwd(), path);
    return local.startsWith('..') || isAbsolute(local) ? path : local;
  });
  const lines = decodeMappings(map.mappings).map((segments) => {
    const kept = [];
    for (const [column, source, line, sourceColumn] of segments) {
      const n = kept.length;
      if (source === undefined) continue;
      if (n > 0 && kept[n - 3] === source && kept[n - 2] === line) continue;
      kept.push(column, source, line, sourceColumn);
    }
    return kept;
  });
  const table = JSON.stringify({ file: basename(file), sources, lines });
  const code = (await readFile(file, 'utf8')).replace(/\n\/\/# sourceMappingURL=\S*\s*$/, '\n');
  await writeFile(file, `${code}globalThis[${SOURCE_MAP_GLOBAL}] = ${table};\n`);
}

/**
 * The segments of a source map's `mappings`, line by line: [column, source, line, column] with
 * absolute numbers (from 0), or [column] for a segment that maps nowhere (Source Map v3).
 */
function decodeMappings(mappings) {
  const state = [0, 0, 0, 0];
  return mappings.split(';').map((group) => {
    state[0] = 0;
    const segments = [];
    for (const text of group.split(',')) {
      if (text === '') continue;
      const fields = [];
      let value = 0;
      let shift = 0;
      for (const char of text) {
        const digit = BASE64.indexOf(char);
        value += (digit & 31) << shift;
        if (digit & 32) {
          shift += 5;
        } else {
          fields.push(value & 1 ? -(value >>> 1) : value >>> 1);
          value = 0;
          shift = 0;
        }
      }
      for (let i = 0; i < Math.min(fields.length, 4); i++) state[i] += fields[i];
      segments.push(fields.length >= 4 ? state.slice(0, 4) : [state[0]]);
    }
    return segments;
  });
}

/**
 * Runs componentize-js on `file` against the world `world` from inside `work`, so that the
 * engine's module directory is `work` wherever the caller stands; returns the component's bytes.
 */
async function componentizeIn(work, file, world) {
  const cwd = process.cwd();
  process.chdir(work);
  try {
    const { component } = await componentize({
      sourcePath: file,
      witPath: WIT,
      worldName: world,
      disableFeatures: ['http', 'fetch-event'],
    });
    return component;
  } finally {
    process.chdir(cwd);
  }
}

async function main(args) {
  if (args.length !== 2) {
    console.error('usage: node guest-sdk/js/build.mjs OUT.wasm OPERATOR.js');
    return 2;
  }
  try {
    await build(args[0], args[1]);
    return 0;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    console.error(`weir: building ${args[1]} into a component failed:\n${message}`);
    return 1;
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = await main(process.argv.slice(2));
}
