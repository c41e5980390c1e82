// A standard MCP client (the official TypeScript SDK, @modelcontextprotocol/sdk, pinned in package.json) against
// `screenshot-service mcp`, driven by tests/integration/test_mcp.py: over each transport (stdio and streamable
// HTTP) at once, a long capture with the SDK's default request timeout (60 s), kept alive by the server's
// progress notifications (resetTimeoutOnProgress), and a call cancelled while its job waits in the queue.
// Argument: the plan as JSON ({sides: [{transport, command, args, env, cwd} | {transport, url, key}], long, queued}):
// one client per side, each with a long capture (as many sides as the service has workers, so all are busy), and
// a cancelled call by each of the first two. Prints one JSON object: what each call came back with.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const plan = JSON.parse(process.argv[2]);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function connect(side) {
  const client = new Client({ name: "screenshot-service-sdk-check", version: "1.0.0" });
  const transport = side.transport === "stdio"
    ? new StdioClientTransport({ command: side.command, args: side.args, env: side.env, cwd: side.cwd, stderr: "inherit" })
    : new StreamableHTTPClientTransport(new URL(side.url), {
      requestInit: { headers: { Authorization: `Bearer ${side.key}` } },
    });
  await client.connect(transport);
  return client;
}

function summary(result) {
  return {
    isError: Boolean(result.isError),
    content: result.content.map((part) => ({
      type: part.type, mimeType: part.mimeType, uri: part.uri, size: part.size, data: part.data, text: part.text,
    })),
  };
}

// The long capture: only the SDK's defaults but for resetTimeoutOnProgress, as a client that shows progress.
async function long(client, progress) {
  const started = Date.now();
  try {
    const result = await client.callTool({ name: "take", arguments: plan.long }, undefined, {
      onprogress: (note) => progress.push({ ...note, at: (Date.now() - started) / 1000 }),
      resetTimeoutOnProgress: true,
    });
    return { seconds: (Date.now() - started) / 1000, progress, ...summary(result) };
  } catch (error) {
    return { seconds: (Date.now() - started) / 1000, progress, error: String(error) };
  }
}

// A call cancelled (AbortSignal: notifications/cancelled) once its progress says its job is queued; then the job's
// state through the job_status tool.
async function cancelled(client) {
  const controller = new AbortController();
  const progress = [];
  let reference = null;
  let error = null;
  try {
    await client.callTool({ name: "take", arguments: plan.queued }, undefined, {
      signal: controller.signal,
      onprogress: (note) => {
        progress.push(note);
        const queued = /job (\w+): queued/.exec(note.message || "");
        if (queued && reference === null) {
          reference = queued[1];
          controller.abort("the user gave up");
        }
      },
    });
  } catch (caught) {
    error = String(caught);
  }
  let status = null;
  for (let tries = 0; reference !== null && tries < 100; tries += 1) {
    const answer = await client.callTool({ name: "job_status", arguments: { reference } });
    status = JSON.parse(answer.content[0].text);
    if (status.status !== "queued") break;
    await sleep(100);
  }
  return { reference, error, progress, status };
}

const clients = await Promise.all(plan.sides.map(connect));
const progress = plan.sides.map(() => []);
const longs = clients.map((client, index) => long(client, progress[index]));
// Every worker busy with a long capture (each side's has said `rendering`): a new job waits in the queue.
const deadline = Date.now() + 30_000;  // a server that tells no progress: the checks say so, not a hang
while (!progress.every((notes) => notes.some((note) => /: rendering/.test(note.message || "")))
       && Date.now() < deadline) {
  await sleep(200);
}
const cancels = [];
for (const client of clients.slice(0, 2)) cancels.push(await cancelled(client));
const results = await Promise.all(longs);
await Promise.all(clients.map((client) => client.close()));
console.log(JSON.stringify({ long: results, cancelled: cancels }));
