// Drives the hosted API's official Node SDK (screenshotone-api-sdk, pinned in package.json) against this
// service, for tests/integration/test_sdks.py. Reads a plan as JSON on stdin:
//   {"base": "http://HOST:PORT/v1/screenshot", "accessKey": "...", "signingKey": "...", "out": "DIR",
//    "calls": [{"id": "...", "kind": "take" | "animate" | "store" | "urls", "source": ["url", "http://..."],
//               "methods": [["viewportWidth", 400], ...], "store": [path, bucket, ...]}]}
// or {"describe": true}, which prints the builder methods of TakeOptions and AnimateOptions.
// Prints one JSON object per call, in the plan's order: the response's type and size (its bytes written
// to DIR/<id>), or the SDK's error (status, code, message, documentation URL).
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Client, TakeOptions, AnimateOptions, APIError } = require('screenshotone-api-sdk');

const plan = JSON.parse(readFileSync(0, 'utf8'));

const builders = (cls) => Object.getOwnPropertyNames(cls.prototype)
  .filter((name) => name !== 'constructor' && name !== 'put' && name !== 'toQuery');

if (plan.describe) {
  process.stdout.write(JSON.stringify({ take: builders(TakeOptions), animate: builders(AnimateOptions) }));
  process.exit(0);
}

const client = new Client(plan.accessKey, plan.signingKey, plan.base);

async function run(call) {
  const cls = call.kind === 'animate' ? AnimateOptions : TakeOptions;
  const [sourceKind, source] = call.source;
  const options = cls[sourceKind](source);
  for (const [method, ...args] of call.methods) options[method](...args);
  const query = Object.fromEntries([...options.toQuery().keys()].map((key) => [key, options.toQuery().getAll(key)]));
  try {
    if (call.kind === 'urls') {  // the client's URL makers, for the test to fetch
      return { id: call.id, ok: true, query, urls: {
        take: await client.generateTakeURL(options), signedTake: await client.generateSignedTakeURL(options),
        signedAnimate: await client.generateSignedAnimateURL(AnimateOptions.url(source)) } };
    }
    if (call.kind === 'store') {
      const stored = await client.store(options, ...call.store);
      return { id: call.id, ok: true, query, stored };
    }
    const blob = call.kind === 'animate' ? await client.animate(options) : await client.take(options);
    const bytes = Buffer.from(await blob.arrayBuffer());
    writeFileSync(join(plan.out, call.id), bytes);
    return { id: call.id, ok: true, query, type: blob.type, size: bytes.length };
  } catch (error) {
    if (error instanceof APIError) {
      return { id: call.id, ok: false, query, status: error.httpStatusCode, code: error.errorCode,
               message: error.errorMessage, documentationUrl: error.documentationUrl };
    }
    return { id: call.id, ok: false, query, thrown: String(error) };
  }
}

// A few calls at a time, as an application would make them.
const results = new Array(plan.calls.length);
let next = 0;
async function lane() {
  while (next < plan.calls.length) {
    const index = next++;
    results[index] = await run(plan.calls[index]);
  }
}
await Promise.all(Array.from({ length: plan.parallel || 4 }, lane));
process.stdout.write(JSON.stringify(results));
